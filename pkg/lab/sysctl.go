package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cnibench/cnibench/pkg/netns"
)

const procSys = "/proc/sys"

// nsSysctl writes a sysctl inside a namespace (key like "net/ipv4/ip_forward").
// /proc/sys/net resolves to the writing thread's namespace, hence netns.Do.
func nsSysctl(ns, key, value string) error {
	return netns.Do(ns, func() error {
		if err := os.WriteFile(filepath.Join(procSys, key), []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s in %s: %w", strings.ReplaceAll(key, "/", "."), value, ns, err)
		}
		return nil
	})
}

// nsSysctlWritable reports whether key can be written inside ns. On kernels
// where a sysctl is not per-namespace, /proc/sys shows it read-only there.
func nsSysctlWritable(ns, key string) (bool, error) {
	var ok bool
	err := netns.Do(ns, func() error {
		f, err := os.OpenFile(filepath.Join(procSys, key), os.O_WRONLY, 0)
		if err != nil {
			if errors.Is(err, os.ErrPermission) {
				return nil
			}
			return err
		}
		f.Close()
		ok = true
		return nil
	})
	return ok, err
}

func readSysctl(key string) (string, error) {
	b, err := os.ReadFile(filepath.Join(procSys, key))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// hostSysctl changes a host-wide sysctl for the lab's lifetime: it journals
// the old value in the lab's state (fsynced) before writing the new one, so
// Down or Clean can restore it even after a crash.
func (b *builder) hostSysctl(key, value string) error {
	old, err := readSysctl(key)
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	b.l.Sysctls = append(b.l.Sysctls, SysctlJournal{Path: key, Old: old, New: value})
	if err := b.l.save(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(procSys, key), []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", strings.ReplaceAll(key, "/", "."), value, err)
	}
	return nil
}

// restoreSysctls puts journaled host sysctls back, newest first. A value
// someone changed after us is left alone: it is no longer ours to restore.
func restoreSysctls(js []SysctlJournal) error {
	var errs []error
	for i := len(js) - 1; i >= 0; i-- {
		j := js[i]
		cur, err := readSysctl(j.Path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if cur != j.New {
			continue
		}
		if err := os.WriteFile(filepath.Join(procSys, j.Path), []byte(j.Old), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore %s=%s: %w", j.Path, j.Old, err))
		}
	}
	return errors.Join(errs...)
}
