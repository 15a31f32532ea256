package experiment

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestOverridesSetText(t *testing.T) {
	var o Overrides
	if err := o.SetText("500ms", "5%", "2m"); err != nil {
		t.Fatal(err)
	}
	if *o.Warmup != 500*time.Millisecond || *o.Precision != 0.05 || *o.Budget != 2*time.Minute {
		t.Errorf("%+v", o)
	}
	for _, c := range [][3]string{{"soon", "", ""}, {"", "five", ""}, {"", "", "1 week"}} {
		var o Overrides
		if err := o.SetText(c[0], c[1], c[2]); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: got %v, want ErrInvalid", c, err)
		}
	}
}

func TestArmSet(t *testing.T) {
	e := &Experiment{Name: "x", Arms: []Arm{{Name: "a"}, {Name: "b"}}}
	if s, err := e.ArmSet("--profile-arms", nil); s != nil || err != nil {
		t.Errorf("no names: %v %v", s, err)
	}
	if s, err := e.ArmSet("--profile-arms", []string{"b"}); err != nil || !s["b"] || s["a"] {
		t.Errorf("b: %v %v", s, err)
	}
	if _, err := e.ArmSet("--profile-arms", []string{"c"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "--profile-arms: no arm \"c\" (arms: a, b)") {
		t.Errorf("unknown arm: %v", err)
	}
}
