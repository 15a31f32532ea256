package units

import "testing"

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"1": 1, "64": 64, "1K": 1024, "4k": 4096, "64K": 65536, "1M": 1 << 20} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
		if back, _ := ParseSize(FormatSize(want)); back != want {
			t.Errorf("FormatSize(%d) = %q does not round-trip", want, FormatSize(want))
		}
	}
	for _, bad := range []string{"", "0", "-1", "1Q", "K", "1.5K", "99999999999G"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"0": 0, "100M": 1e8, "2G": 2e9, "1.5g": 1.5e9, "800k": 8e5} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1M", "fast", "1T", "NaN", "nanM", "Inf", "+InfG"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) accepted", bad)
		}
	}
}

func TestParseSizes(t *testing.T) {
	if l, err := ParseSizes("1,1K,4K"); err != nil || len(l) != 3 || l[0] != 1 || l[2] != 4096 {
		t.Errorf("ParseSizes: %v %v", l, err)
	}
	for _, bad := range []string{"1,,4K", "1Q", ""} {
		if _, err := ParseSizes(bad); err == nil {
			t.Errorf("ParseSizes(%q) accepted", bad)
		}
	}
}
