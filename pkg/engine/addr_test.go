package engine

import "testing"

func TestSplitServer(t *testing.T) {
	for _, tc := range []struct {
		in      string
		port    int
		set     bool
		host    string
		want    int
		wantErr bool
	}{
		{"10.99.0.2", DefaultPort, false, "10.99.0.2", DefaultPort, false},
		{"10.99.0.2:5201", DefaultPort, false, "10.99.0.2", 5201, false},
		{"server.example:9000", DefaultPort, false, "server.example", 9000, false},
		{"[fd00::2]:5201", DefaultPort, false, "fd00::2", 5201, false},
		{"fd00::2", 7000, true, "fd00::2", 7000, false},
		{"[fd00::2]", DefaultPort, false, "fd00::2", DefaultPort, false},
		{"10.99.0.2:5201", 5201, true, "10.99.0.2", 5201, false},
		{"10.99.0.2:5201", 7420, true, "", 0, true}, // conflict
		{"10.99.0.2:0", DefaultPort, false, "", 0, true},
		{"10.99.0.2:http", DefaultPort, false, "", 0, true},
		{":5201", DefaultPort, false, "", 0, true},
		{"", DefaultPort, false, "", 0, true},
	} {
		host, port, err := SplitServer(tc.in, tc.port, tc.set)
		if (err != nil) != tc.wantErr || host != tc.host || port != tc.want {
			t.Errorf("SplitServer(%q, %d, %v) = %q, %d, %v", tc.in, tc.port, tc.set, host, port, err)
		}
	}
}
