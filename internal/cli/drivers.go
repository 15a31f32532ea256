package cli

// The engines `cnibench client --engine` and experiments can name. Each
// driver package registers itself with driver.Register from init().
import (
	_ "github.com/cnibench/cnibench/pkg/driver/builtin"
	_ "github.com/cnibench/cnibench/pkg/driver/iperf3"
	_ "github.com/cnibench/cnibench/pkg/driver/qperf"
	_ "github.com/cnibench/cnibench/pkg/driver/sockperf"
)
