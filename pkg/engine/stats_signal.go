package engine

import (
	"fmt"
	"io"
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

// StatsOnSIGUSR1 prints, on every SIGUSR1 until the returned stop is
// called, what the server holds — sessions, pending connections,
// goroutines, descriptors — as many daemons do.
func (s *Server) StatsOnSIGUSR1(w io.Writer) (stop func()) {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, unix.SIGUSR1)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-usr1:
				st := s.Stats()
				fds, _ := os.ReadDir("/proc/self/fd")
				fmt.Fprintf(w, "cnibench server: stats sessions=%d pending=%d goroutines=%d fds=%d\n", st.Sessions, st.Pending, st.Goroutines, len(fds))
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(usr1); close(done) }
}
