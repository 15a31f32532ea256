package tune

import (
	"errors"
	"testing"
)

// A fixture root answers from its files; knobs that can only ask the live
// kernel say so instead of reading this host.
func TestEnvAt(t *testing.T) {
	if e := EnvAt("/"); e.ProcRoot != "/proc" || e.NIC != nil {
		t.Errorf("EnvAt(/) = %+v", e)
	}
	e := EnvAt("/fx")
	if e.ProcRoot != "/fx/proc" || e.SysRoot != "/fx/sys" || e.OVSDB != "/fx/var/run/openvswitch/db.sock" {
		t.Errorf("EnvAt(/fx) = %+v", e)
	}
	if _, err := e.NIC.Driver("eth0"); !errors.Is(err, ErrLiveOnly) {
		t.Errorf("NIC at a fixture root: %v", err)
	}
	if _, _, err := e.Rules.KubeProxyRules(); !errors.Is(err, ErrLiveOnly) {
		t.Errorf("rules at a fixture root: %v", err)
	}
}
