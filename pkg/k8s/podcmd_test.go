package k8s

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestExperimentTextKeepsFlagsButHelpAndKubeconfig(t *testing.T) {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	fs.Bool("help", false, "")
	fs.String("kubeconfig", "", "")
	fs.String("scenarios", "default", "")
	fs.Int("repeats", 1, "")
	if err := fs.Parse([]string{"--kubeconfig", "/home/me/kc", "--repeats", "3"}); err != nil {
		t.Fatal(err)
	}
	got := ExperimentText("cnibench k8s run", fs)
	// VisitAll goes in name order; the values are quoted so a comma list
	// or an empty value reads back as given.
	want := "# cnibench k8s run\nrepeats: \"3\"\nscenarios: \"default\"\n"
	if got != want {
		t.Errorf("ExperimentText:\n%s\nwant:\n%s", got, want)
	}
}

func TestAgentCPURefusesIntervalsBelowATick(t *testing.T) {
	err := AgentCPUCommand{Interval: time.Millisecond}.Run(context.Background(), &bytes.Buffer{})
	if !errors.Is(err, ErrInvalid) || err.Error() != "--interval 1ms: must be at least 10ms" {
		t.Errorf("Run: %v (is ErrInvalid: %v)", err, errors.Is(err, ErrInvalid))
	}
}

func TestWaitTCPCommandSaysWhenTheAddressAccepted(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out bytes.Buffer
	c := WaitTCPCommand{Addr: l.Addr().String(), Timeout: 5 * time.Second}
	if err := c.Run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), c.Addr+" accepted after ") {
		t.Errorf("output %q", out.String())
	}
}
