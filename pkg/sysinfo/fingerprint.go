package sysinfo

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"

	"github.com/cnibench/cnibench/pkg/result"
	"golang.org/x/sys/unix"
)

// Fingerprint describes the host for result.Env. version is cnibench's own
// version. Facts that cannot be read are left empty with a note saying why,
// so a reader never mistakes "unknown" for a value.
func (fs FS) Fingerprint(version string) result.Fingerprint {
	f := result.Fingerprint{Cnibench: version, Notes: map[string]string{}}
	f.Hostname, _ = os.Hostname()
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		f.Kernel = unix.ByteSliceToString(u.Release[:])
	} else {
		f.Notes["kernel"] = "uname: " + err.Error()
	}
	if b, err := os.ReadFile(filepath.Join(fs.Etc, "os-release")); err == nil {
		f.Distro = osRelease(b)
	} else {
		f.Notes["distro"] = "no os-release: " + err.Error()
	}
	if b, err := os.ReadFile(filepath.Join(fs.Proc, "cpuinfo")); err == nil {
		f.CPUModel, f.Cores = cpuinfo(b)
	} else {
		f.Notes["cpu_model"] = "no cpuinfo: " + err.Error()
	}
	if f.CPUModel == "" && f.Notes["cpu_model"] == "" {
		f.Notes["cpu_model"] = "cpuinfo has no \"model name\" line"
	}
	if b, err := os.ReadFile(filepath.Join(fs.Sys, "devices/system/cpu/cpu0/cpufreq/scaling_governor")); err == nil {
		f.Governor = strings.TrimSpace(string(b))
	} else {
		// Common in VMs: the hypervisor owns frequency scaling.
		f.Notes["governor"] = "no cpufreq"
	}
	f.NICDrivers = nicDrivers(fs.Sys)
	if len(f.Notes) == 0 {
		f.Notes = nil
	}
	return f
}

func osRelease(b []byte) string {
	vals := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok {
			vals[k] = strings.Trim(v, `"'`)
		}
	}
	if v := vals["PRETTY_NAME"]; v != "" {
		return v
	}
	return strings.TrimSpace(vals["NAME"] + " " + vals["VERSION_ID"])
}

// cpuinfo returns the first model name and the number of logical CPUs
// ("processor" lines), which is what the benchmark threads can use.
func cpuinfo(b []byte) (model string, cores int) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "processor":
			cores++
		case "model name":
			if model == "" {
				model = strings.TrimSpace(v)
			}
		}
	}
	return model, cores
}

// nicDrivers maps each interface with a device to its driver name, from the
// <sys>/class/net/*/device/driver symlinks. Virtual interfaces (lo, veth,
// bridges) have no device and are left out.
func nicDrivers(sys string) map[string]string {
	ents, err := os.ReadDir(filepath.Join(sys, "class/net"))
	if err != nil {
		return nil
	}
	m := map[string]string{}
	for _, e := range ents {
		t, err := os.Readlink(filepath.Join(sys, "class/net", e.Name(), "device/driver"))
		if err == nil {
			m[e.Name()] = filepath.Base(t)
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}
