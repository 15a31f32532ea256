package k8s

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

// profileSecurity is the client container's security context under
// --profile: system-wide perf events with kernel callchains need
// CAP_PERFMON, and readable /proc/kallsyms addresses CAP_SYSLOG. Added
// capabilities only reach a process that runs as uid 0 (Kubernetes sets no
// ambient capabilities, and execve by another uid clears them), so this
// container runs as root — with every other capability dropped, no
// privilege escalation, a read-only root filesystem and the runtime's
// seccomp profile, as without --profile. ClientPod also gives the pod the
// node's PID namespace, so samples name the processes they came from.
func profileSecurity() *corev1.SecurityContext {
	sc := engineSecurity()
	sc.RunAsNonRoot = ptr(false)
	sc.RunAsUser = ptr(int64(0))
	sc.RunAsGroup = ptr(int64(0))
	sc.Capabilities.Add = []corev1.Capability{"PERFMON", "SYSLOG"}
	return sc
}

// StoreProfiles pairs the window profiles a client pod printed with the
// samples StoreSamples made of its results (same test and size), ready for
// store.AddProfile. A profile whose result is absent is dropped: it has no
// sample to belong to.
func StoreProfiles(runID int64, s Sample, stored []*store.Sample) []*store.Profile {
	var out []*store.Profile
	for _, wp := range s.Profiles {
		for _, ss := range stored {
			if ss.Result == nil || ss.Test != wp.Test || ss.MsgSize != wp.MsgSizeBytes {
				continue
			}
			out = append(out, storeProfile(runID, ss.Seq, wp))
			break
		}
	}
	return out
}

func storeProfile(runID int64, seq int, wp *result.WindowProfile) *store.Profile {
	return &store.Profile{RunID: runID, Seq: seq, Event: wp.Event, Frequency: wp.FrequencyHz, CPUs: wp.CPUs,
		WindowNs: wp.WindowNs, Samples: wp.Samples, Lost: wp.Lost, PeriodSum: wp.PeriodSum, Folded: wp.Folded, Missing: wp.Missing}
}
