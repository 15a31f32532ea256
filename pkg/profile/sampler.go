package profile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Callchain context markers (include/uapi/linux/perf_event.h).
const (
	perfContextKernel = -128
	perfContextUser   = -512
	perfContextMax    = -4095
)

const (
	contextKernel = iota
	contextUser
	contextOther
)

// ringPages is the data size of each CPU's ring buffer in pages (a power
// of two). 128 pages = 512 KiB holds ~1,500 samples with 40-frame chains,
// three seconds at the default rate; the reader drains every drainEvery.
const ringPages = 128

// drainEvery is how often the reader empties the rings.
const drainEvery = 100 * time.Millisecond

const sampleType = unix.PERF_SAMPLE_IP | unix.PERF_SAMPLE_TID | unix.PERF_SAMPLE_CALLCHAIN | unix.PERF_SAMPLE_PERIOD

func attr(ev Event, freq int) *unix.PerfEventAttr {
	a := &unix.PerfEventAttr{
		Size:        uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Sample:      uint64(freq),
		Sample_type: sampleType,
		Bits:        unix.PerfBitDisabled | unix.PerfBitFreq,
	}
	switch ev {
	case EventCycles:
		a.Type, a.Config = unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CPU_CYCLES
	default:
		a.Type, a.Config = unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CPU_CLOCK
	}
	return a
}

func open(ev Event, freq, cpu int) (int, error) {
	return unix.PerfEventOpen(attr(ev, freq), -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
}

// classify maps perf_event_open's errno to the package's typed errors.
func classify(err error) error {
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return permissionError(err)
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("%w: perf_event_open: %v (kernel built without CONFIG_PERF_EVENTS, or a seccomp filter)", ErrNotSupported, err)
	}
	return fmt.Errorf("perf_event_open: %w", err)
}

// Check finds out, without sampling anything, whether Start will work:
// it opens (disabled) and closes one event per online CPU, and reads the
// kernel symbols' presence. Call it before building or measuring anything,
// so a missing permission is a one-line error at the start of a run.
// It returns the event Start will use.
func Check(o Options) (Event, error) {
	o, err := o.withDefaults()
	if err != nil {
		return "", err
	}
	cpus, err := onlineCPUs()
	if err != nil {
		return "", err
	}
	ev, err := pickEvent(o, cpus[0])
	if err != nil {
		return "", err
	}
	for _, c := range cpus {
		fd, err := open(ev, o.Frequency, c)
		if err != nil {
			return "", fmt.Errorf("cpu %d: %w", c, classify(err))
		}
		unix.Close(fd)
	}
	if _, err := kernelSymbolsOnce(); err != nil {
		return "", err
	}
	return ev, nil
}

// pickEvent probes hardware cycles (unless cpu-clock was asked for) and
// falls back to the software cpu-clock where the host has no PMU (ENOENT,
// EOPNOTSUPP, ENODEV: most VMs).
func pickEvent(o Options, cpu int) (Event, error) {
	if o.Event == EventCPUClock {
		return EventCPUClock, nil
	}
	fd, err := open(EventCycles, o.Frequency, cpu)
	if err == nil {
		unix.Close(fd)
		return EventCycles, nil
	}
	if o.Event == EventCycles {
		return "", fmt.Errorf("hardware cycles event: %w", classify(err))
	}
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		return "", classify(err)
	}
	return EventCPUClock, nil
}

var (
	symsOnce sync.Once
	symsVal  *Symbols
	symsErr  error
)

func kernelSymbolsOnce() (*Symbols, error) {
	symsOnce.Do(func() { symsVal, symsErr = KernelSymbols() })
	symsMu.Lock()
	defer symsMu.Unlock()
	return symsVal, symsErr
}

// symsMu guards symsVal once refreshSymbols may replace it.
var symsMu sync.Mutex

// refreshSymbols reads /proc/kallsyms again and keeps the result for the
// sessions opened later; on error the old table stays.
func refreshSymbols() (*Symbols, error) {
	fresh, err := KernelSymbols()
	if err != nil {
		return nil, err
	}
	symsMu.Lock()
	symsVal = fresh
	symsMu.Unlock()
	return fresh, nil
}

// rawKey is a sample as recorded: comm, then the pid (user-space frames
// are resolved in that process's maps), the IP and the callchain as
// little-endian words (a comm holds no NUL).
func rawKey(comm string, pid uint32, ip uint64, chain []uint64) string {
	b := make([]byte, 0, len(comm)+5+8*(len(chain)+1))
	b = append(b, comm...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint32(b, pid)
	b = binary.LittleEndian.AppendUint64(b, ip)
	for _, a := range chain {
		b = binary.LittleEndian.AppendUint64(b, a)
	}
	return string(b)
}

// parseRawKey undoes rawKey.
func parseRawKey(k string) (comm string, pid uint32, ip uint64, chain []uint64) {
	comm, rest, _ := strings.Cut(k, "\x00")
	if len(rest) < 4 {
		return comm, 0, 0, nil
	}
	pid, rest = binary.LittleEndian.Uint32([]byte(rest[:4])), rest[4:]
	words := make([]uint64, len(rest)/8)
	for i := range words {
		words[i] = binary.LittleEndian.Uint64([]byte(rest[8*i : 8*i+8]))
	}
	if len(words) == 0 {
		return comm, pid, 0, nil
	}
	return comm, pid, words[0], words[1:]
}

// foldWindow names a window's raw samples. When one of their kernel
// addresses is Volatile — code a module or the BPF JIT may have loaded
// after syms was read — the table is read again first (by refresh), so a
// program loaded since is named and not taken for its neighbour; a failed
// refresh keeps syms. userFrames, when not nil, gives the user-space frame
// namer of a sample's process (nil where its comm is not symbolized). It
// returns the stacks and the table it used.
func foldWindow(raw map[string]uint64, syms *Symbols, refresh func() (*Symbols, error), userFrames func(comm string, pid uint32) func(uint64) string) (map[string]uint64, *Symbols) {
	if syms != nil && refresh != nil {
	scan:
		for k := range raw {
			_, _, ip, chain := parseRawKey(k)
			for _, a := range append([]uint64{ip}, chain...) {
				if isKernelAddr(a) && int64(a) < perfContextMax && syms.Volatile(a) {
					if fresh, err := refresh(); err == nil {
						syms = fresh
					}
					break scan
				}
			}
		}
	}
	stacks := make(map[string]uint64, len(raw))
	for k, n := range raw {
		comm, pid, ip, chain := parseRawKey(k)
		var userFrame func(uint64) string
		if userFrames != nil {
			userFrame = userFrames(comm, pid)
		}
		stacks[foldStack(comm, ip, chain, syms, userFrame)] += n
	}
	return stacks, syms
}

// onlineCPUs parses /sys/devices/system/cpu/online ("0-1,4").
func onlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		// Fall back to the CPUs the Go runtime sees.
		var cpus []int
		for i := 0; i < runtime.NumCPU(); i++ {
			cpus = append(cpus, i)
		}
		return cpus, nil
	}
	return parseCPUList(strings.TrimSpace(string(b)))
}

func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %v", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("cpu list %q: bad range %q", s, part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("cpu list %q: empty", s)
	}
	return cpus, nil
}

type ring struct {
	fd   int
	mem  []byte
	meta *unix.PerfEventMmapPage
	data []byte
}

// Session is a set of per-CPU events, opened and mapped but sampling only
// between Start and Stop.
type Session struct {
	opts  Options
	event Event
	syms  *Symbols
	rings []ring

	mu sync.Mutex
	// raw counts the window's samples by comm and raw callchain: they are
	// named only when the window ends, with a symbol table that knows the
	// code loaded meanwhile (see Symbols.Volatile).
	raw     map[string]uint64
	samples uint64
	lost    uint64
	period  uint64
	comms   map[uint32]string
	// users resolves the user-space functions of UserSymbolized
	// processes (usersyms.go), made at the first such sample of a window.
	users *userSyms

	started time.Time
	stop    chan struct{}
	done    chan struct{}
	closed  atomic.Bool
}

// Open prepares a session: one disabled event and ring per online CPU.
// Nothing is sampled until Start.
func Open(o Options) (*Session, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	cpus, err := onlineCPUs()
	if err != nil {
		return nil, err
	}
	ev, err := pickEvent(o, cpus[0])
	if err != nil {
		return nil, err
	}
	syms, err := kernelSymbolsOnce()
	if err != nil {
		return nil, err
	}
	s := &Session{opts: o, event: ev, syms: syms}
	page := os.Getpagesize()
	for _, c := range cpus {
		fd, err := open(ev, o.Frequency, c)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("cpu %d: %w", c, classify(err))
		}
		mem, err := unix.Mmap(fd, 0, (1+ringPages)*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			unix.Close(fd)
			s.Close()
			return nil, fmt.Errorf("map perf ring of cpu %d: %w", c, err)
		}
		meta := (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))
		s.rings = append(s.rings, ring{fd: fd, mem: mem, meta: meta, data: mem[page:]})
	}
	return s, nil
}

// Event is the event this session samples.
func (s *Session) Event() Event { return s.event }

// userFrames gives foldWindow the user-space frame namer of a sample's
// process: nil unless its comm is UserSymbolized. The window is named when
// it ends, while the datapath daemon whose maps it reads still runs.
func (s *Session) userFrames(comm string, pid uint32) func(uint64) string {
	if !UserSymbolized[comm] {
		return nil
	}
	if s.users == nil {
		s.users = newUserSyms()
	}
	return func(a uint64) string { return s.users.frame(pid, a) }
}

// Start clears what an earlier window collected and enables every CPU's
// event.
func (s *Session) Start() error {
	s.mu.Lock()
	s.raw, s.samples, s.lost, s.period = map[string]uint64{}, 0, 0, 0
	s.comms = map[uint32]string{0: "swapper"}
	s.users = nil
	s.mu.Unlock()
	for _, r := range s.rings {
		// Skip whatever a previous window left unread.
		atomic.StoreUint64(&r.meta.Data_tail, atomic.LoadUint64(&r.meta.Data_head))
	}
	s.started = time.Now()
	for _, r := range s.rings {
		if err := unix.IoctlSetInt(r.fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
			s.disable()
			return fmt.Errorf("enable perf event: %w", err)
		}
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.reader()
	return nil
}

func (s *Session) disable() {
	for _, r := range s.rings {
		unix.IoctlSetInt(r.fd, unix.PERF_EVENT_IOC_DISABLE, 0)
	}
}

// Stop disables the events, reads what is left in the rings and returns
// the window's profile.
func (s *Session) Stop() (*Profile, error) {
	if s.stop == nil {
		return nil, errors.New("profile: Stop without Start")
	}
	s.disable()
	window := time.Since(s.started)
	close(s.stop)
	<-s.done
	s.stop = nil
	s.drain()
	s.mu.Lock()
	defer s.mu.Unlock()
	var stacks map[string]uint64
	stacks, s.syms = foldWindow(s.raw, s.syms, refreshSymbols, s.userFrames)
	p := &Profile{
		Event: s.event, Frequency: s.opts.Frequency, CPUs: len(s.rings), WindowNs: window.Nanoseconds(),
		Samples: s.samples, Lost: s.lost, PeriodSum: s.period, Stacks: stacks,
	}
	s.raw = nil
	return p, nil
}

// Close unmaps the rings and closes the events. Safe to call twice.
func (s *Session) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.stop != nil {
		s.disable()
		close(s.stop)
		<-s.done
		s.stop = nil
	}
	for _, r := range s.rings {
		unix.Munmap(r.mem)
		unix.Close(r.fd)
	}
	s.rings = nil
	return nil
}

func (s *Session) reader() {
	defer close(s.done)
	t := time.NewTicker(drainEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.drain()
		}
	}
}

// drain reads every ring from tail to head and advances the tail.
func (s *Session) drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rings {
		head := atomic.LoadUint64(&r.meta.Data_head)
		tail := atomic.LoadUint64(&r.meta.Data_tail)
		size := uint64(len(r.data))
		var buf []byte
		for tail < head {
			off := tail % size
			// A record may wrap around the end of the ring: copy it out.
			hdr := readAt(r.data, off, 8, &buf)
			typ := binary.NativeEndian.Uint32(hdr[0:4])
			rsize := uint64(binary.NativeEndian.Uint16(hdr[6:8]))
			if rsize < 8 || tail+rsize > head {
				break
			}
			rec := readAt(r.data, off, rsize, &buf)
			s.record(typ, rec[8:])
			tail += rsize
		}
		atomic.StoreUint64(&r.meta.Data_tail, tail)
	}
}

func readAt(data []byte, off, n uint64, buf *[]byte) []byte {
	size := uint64(len(data))
	if off+n <= size {
		return data[off : off+n]
	}
	*buf = append((*buf)[:0], data[off:]...)
	*buf = append(*buf, data[:n-(size-off)]...)
	return *buf
}

// record accounts one ring record (the header already stripped).
func (s *Session) record(typ uint32, body []byte) {
	switch typ {
	case unix.PERF_RECORD_LOST:
		if len(body) >= 16 {
			s.lost += binary.NativeEndian.Uint64(body[8:16])
		}
	case unix.PERF_RECORD_SAMPLE:
		smp, ok := parseSample(body)
		if !ok {
			return
		}
		s.samples++
		s.period += smp.period
		s.raw[rawKey(s.comm(smp.pid), smp.pid, smp.ip, smp.chain)]++
	}
}

type sample struct {
	ip       uint64
	pid, tid uint32
	period   uint64
	chain    []uint64
}

// parseSample decodes a PERF_RECORD_SAMPLE body laid out for sampleType:
// ip, pid+tid, period, nr, ips[nr] (fields appear in sample_type bit order).
func parseSample(b []byte) (sample, bool) {
	var s sample
	if len(b) < 32 {
		return s, false
	}
	e := binary.NativeEndian
	s.ip = e.Uint64(b[0:])
	s.pid, s.tid = e.Uint32(b[8:]), e.Uint32(b[12:])
	s.period = e.Uint64(b[16:])
	nr := e.Uint64(b[24:])
	if nr > uint64(len(b)-32)/8 {
		return s, false
	}
	s.chain = make([]uint64, nr)
	for i := range s.chain {
		s.chain[i] = e.Uint64(b[32+8*i:])
	}
	return s, true
}

// comm names a process by its pid, read once per window from
// /proc/PID/comm (the process's main thread: "ovs-vswitchd" rather than
// its "handler12" threads). A process gone before it was read is "[pid]".
func (s *Session) comm(pid uint32) string {
	if c, ok := s.comms[pid]; ok {
		return c
	}
	c := "[exited]"
	if b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/comm"); err == nil {
		c = strings.TrimSpace(string(b))
	}
	s.comms[pid] = c
	return c
}
