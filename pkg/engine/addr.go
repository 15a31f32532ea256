package engine

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// SplitServer reads a --server value: HOST, HOST:PORT, [IPv6]:PORT, or a
// bare IPv6 address. port is --port's value and portSet whether it was
// given; a port in both places that differs is an error, so the command
// never silently measures another port than the one a person wrote.
func SplitServer(server string, port int, portSet bool) (string, int, error) {
	if server == "" {
		return "", 0, fmt.Errorf("--server is required: give HOST, HOST:PORT or [IPv6]:PORT")
	}
	host, ps, err := net.SplitHostPort(server)
	if err != nil {
		// No port: a name, an IPv4 address, or an IPv6 address with its
		// colons (and maybe brackets) but no port.
		if strings.HasPrefix(server, "[") && strings.HasSuffix(server, "]") {
			server = server[1 : len(server)-1]
		}
		if strings.ContainsAny(server, "[]/ ") || (strings.Count(server, ":") == 1) {
			return "", 0, fmt.Errorf("--server %q: want HOST, HOST:PORT or [IPv6]:PORT", server)
		}
		return server, port, nil
	}
	p, err := strconv.Atoi(ps)
	if err != nil || p < 1 || p > 65535 || host == "" {
		return "", 0, fmt.Errorf("--server %q: want HOST:PORT with a port 1-65535", server)
	}
	if portSet && p != port {
		return "", 0, fmt.Errorf("--server %q names port %d but --port says %d: give the port once", server, p, port)
	}
	return host, p, nil
}
