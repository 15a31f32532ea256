package profile

import (
	"errors"
	"strings"
	"testing"
)

func TestFlagsOptions(t *testing.T) {
	if o, err := (Flags{}).Options(); o != nil || err != nil {
		t.Errorf("no --profile: %+v, %v", o, err)
	}
	o, err := Flags{On: true, Rate: 99, Event: "cpu-clock"}.Options()
	if err != nil || o.Frequency != 99 || o.Event != "cpu-clock" {
		t.Errorf("--profile: %+v, %v", o, err)
	}
	for _, tc := range []struct {
		f    Flags
		want string
	}{
		{Flags{Arms: []string{"a"}}, "--profile-arms needs --profile"},
		{Flags{On: true, Rate: 0}, "--profile-rate 0: want 1.."},
		{Flags{On: true, Rate: MaxFrequency + 1}, "--profile: "},
		{Flags{On: true, Rate: 99, Event: "instructions"}, "--profile: "},
	} {
		_, err := tc.f.Options()
		if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want ErrInvalid starting %q", tc.f, err, tc.want)
		}
	}
}
