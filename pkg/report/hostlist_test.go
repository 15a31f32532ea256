package report

import "testing"

func TestHostList(t *testing.T) {
	if got := hostList([]string{"a", "b"}); got != "a, b" {
		t.Errorf("hostList(2) = %q", got)
	}
	if got := hostList([]string{"a", "b", "c", "d", "e", "f"}); got != "a, b, c, d and 2 more" {
		t.Errorf("hostList(6) = %q", got)
	}
}
