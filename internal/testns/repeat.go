package testns

import (
	"sync"
	"testing"
	"time"
)

// Repeat calls f again and again on a goroutine, waiting every between
// calls (0: as fast as it can), until the returned stop is called. Tests
// use it to disturb or watch the host while the code under test runs.
//
// stop returns only once the goroutine has ended, so that what f does is
// over before the test reads its effects; it may be called more than once,
// and runs when t ends in any case, so a test that fails early leaves no
// goroutine behind.
func Repeat(t testing.TB, every time.Duration, f func()) (stop func()) {
	t.Helper()
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			if every > 0 {
				select {
				case <-done:
					return
				case <-time.After(every):
				}
			} else {
				select { // no timer: a watcher polls as fast as it can
				case <-done:
					return
				default:
				}
			}
			f()
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() { close(done) })
		<-stopped
	}
	t.Cleanup(stop)
	return stop
}
