package runid

import "testing"

func TestNewIsValidAndVaries(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		id := New()
		if !Valid(id) {
			t.Fatalf("New() = %q, not valid", id)
		}
		seen[id] = true
	}
	if len(seen) < 90 {
		t.Fatalf("only %d distinct ids in 100", len(seen))
	}
}

func TestIfNameLimit(t *testing.T) {
	if _, err := IfName("ab12", "n1p49h"); err != nil {
		t.Fatalf("15-byte name rejected: %v", err)
	}
	if _, err := IfName("ab12", "n1p49hx"); err == nil {
		t.Fatal("16-byte name accepted")
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in         string
		id, suffix string
		ok         bool
	}{
		{"cnb-ab12-veth0", "ab12", "veth0", true},
		{"cnb-ab12-", "ab12", "", true},
		{"cnb-AB12-x", "", "", false},
		{"cnb-ab1-x", "", "", false},
		{"eth0", "", "", false},
	} {
		id, s, ok := Parse(tc.in)
		if id != tc.id || s != tc.suffix || ok != tc.ok {
			t.Errorf("Parse(%q) = %q,%q,%v; want %q,%q,%v", tc.in, id, s, ok, tc.id, tc.suffix, tc.ok)
		}
	}
}
