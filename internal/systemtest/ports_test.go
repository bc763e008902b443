package systemtest

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePortsAreDistinctAndOutsideTheEphemeralRange(t *testing.T) {
	ports, err := freePorts(60)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d handed out twice in %v", p, ports)
		}
		seen[p] = true
		if p >= ephemeralLow() {
			t.Fatalf("port %d is in the ephemeral range (from %d)", p, ephemeralLow())
		}
		// Free again once freePorts returned: a server can bind it.
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d not free after freePorts: %v", p, err)
		}
		_ = ln.Close()
	}
}
