package profile

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A function of an executable with a symbol table is named at its
// address in a process that maps it (a small Go program built for the test,
// mapped as the kernel maps its text segment).
func TestUserFrameNamesAFunction(t *testing.T) {
	goTool, err := exec.LookPath(filepath.Join(runtime.GOROOT(), "bin", "go"))
	if err != nil {
		t.Skip("no go tool to build the program")
	}
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "main.go"), filepath.Join(dir, "prog")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() { println(\"x\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goTool, "build", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var mainAddr uint64
	for _, s := range syms {
		if s.Name == "main.main" {
			mainAddr = s.Value
		}
	}
	var text *elf.Prog
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			text = p
		}
	}
	f.Close()
	if mainAddr == 0 || text == nil {
		t.Fatal("no main.main or no text segment in the built program")
	}
	// The kernel maps the segment's pages: start and offset page-aligned.
	load := 0x7f0000000000 - (text.Vaddr &^ 0xfff) // as if relocated (a PIE)
	m := mapping{start: (text.Vaddr &^ 0xfff) + load, end: text.Vaddr + text.Memsz + load, off: text.Off &^ 0xfff, path: bin}
	u := &userSyms{procs: map[uint32][]mapping{7: {m}}, modules: map[string]*module{}}
	if got := u.frame(7, mainAddr+load+1); got != "[user:main.main@prog]" {
		t.Errorf("frame of main.main = %q", got)
	}
	if got := u.frame(7, 8); got != "[user:?]" {
		t.Errorf("an address in no mapping = %q", got)
	}
	if got := newUserSyms().frame(1<<31, mainAddr); got != "[user:?]" {
		t.Errorf("a process that is gone = %q", got)
	}
}

// A stripped executable (Debian's ovs-vswitchd) names none of its
// functions, and the frame says why rather than guessing.
func TestUserFrameStripped(t *testing.T) {
	const vswitchd = "/usr/lib/openvswitch-switch/ovs-vswitchd"
	if _, err := os.Stat(vswitchd); err != nil {
		t.Skip("no " + vswitchd + " (scripts/install-deps.sh installs openvswitch-switch)")
	}
	m := loadModule(vswitchd)
	if m.why != "stripped" || len(m.funcs) != 0 {
		t.Fatalf("ovs-vswitchd: why %q, %d functions; want stripped, none", m.why, len(m.funcs))
	}
	u := &userSyms{procs: map[uint32][]mapping{7: {{start: 0x1000, end: 0x9000, off: 0, path: vswitchd}}}, modules: map[string]*module{}}
	if got := u.frame(7, 0x2000); got != "[user:?@ovs-vswitchd stripped]" {
		t.Errorf("frame = %q", got)
	}
}

func TestParseMaps(t *testing.T) {
	in := "55d0a8a00000-55d0a8b00000 r-xp 00020000 fd:01 123 /usr/lib/openvswitch-switch/ovs-vswitchd\n" +
		"55d0a8b00000-55d0a8c00000 rw-p 00120000 fd:01 123 /usr/lib/openvswitch-switch/ovs-vswitchd\n" +
		"7f0000000000-7f0000001000 r-xp 00000000 00:00 0 \n" +
		"7ffd0000000-7ffd0001000 r-xp 00000000 00:00 0 [vdso]\n"
	got := parseMaps(bufio.NewScanner(strings.NewReader(in)))
	if len(got) != 1 || got[0].String() != "55d0a8a00000-55d0a8b00000 20000 /usr/lib/openvswitch-switch/ovs-vswitchd" {
		t.Errorf("maps %v", got)
	}
}
