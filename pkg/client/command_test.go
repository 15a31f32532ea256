package client

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/profile"
)

// Bad flags, the client's own and --profile's, are refused before anything
// is measured or printed.
func TestCommandRefusesBadFlags(t *testing.T) {
	ok := Flags{Server: "127.0.0.1", Port: 7420, Tests: "tcp_lat", Sizes: "1", Engine: "builtin",
		Duration: time.Second, Parallel: 1}
	for _, tc := range []struct {
		c  Command
		is error
	}{
		{Command{Flags: Flags{Tests: "tcp_lat", Sizes: "1", Engine: "builtin", Duration: time.Second, Parallel: 1}}, ErrInvalid},
		{Command{Flags: func() Flags { f := ok; f.Tests = "tcp_rr"; return f }()}, ErrInvalid},
		{Command{Flags: ok, Profile: profile.Flags{On: true, Rate: 0}}, profile.ErrInvalid},
		{Command{Flags: ok, Profile: profile.Flags{Arms: []string{"a"}}}, profile.ErrInvalid},
	} {
		var out, log bytes.Buffer
		err := tc.c.Run(context.Background(), &out, &log)
		if !errors.Is(err, tc.is) || out.Len()+log.Len() > 0 {
			t.Errorf("%+v: got %v (printed %q %q), want %v", tc.c, err, out.String(), log.String(), tc.is)
		}
	}
}
