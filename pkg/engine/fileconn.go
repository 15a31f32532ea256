package engine

import (
	"net"
	"os"
)

// newFileConn wraps fd in a net.Conn for the control connection, which is
// not on the hot path, and closes fd (net.FileConn dups it).
func newFileConn(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "control")
	defer f.Close()
	return net.FileConn(f)
}
