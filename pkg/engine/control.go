// A session's control connection: the setup a client sends (checked
// against the server's limits), the start and stop of its measurement, and
// the report the server sends back.

package engine

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"time"

	"github.com/cnibench/cnibench/pkg/limits"
	"github.com/cnibench/cnibench/pkg/result"
)

// control runs one client's session on its control connection. leave is
// called once the connection has become a counted session.
func (s *Server) control(fd int, leave func()) {
	f := os.NewFile(uintptr(fd), "control")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return
	}
	defer c.Close()
	peer := c.RemoteAddr().String()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	h, err := readMsg(c, msgHello)
	if err != nil {
		s.logf("%s: bad hello: %v", peer, err)
		return
	}
	if h.Proto != ProtoVersion {
		ve := &VersionError{Client: h.Proto, Server: ProtoVersion, ClientVersion: h.Version, ServerVersion: s.o.Version}
		s.logf("%s: %v", peer, ve)
		_ = writeMsg(c, &Msg{Type: msgError, Error: ve.Error()})
		return
	}
	src := peerIP(c.RemoteAddr())
	id, refusal := s.admit(src)
	if refusal != "" {
		s.logf("%s: refused: %s", peer, refusal)
		_ = writeMsg(c, &Msg{Type: msgError, Code: codeBusy, Error: refusal})
		return
	}
	leave()
	released := false
	release := func() {
		if !released {
			released = true
			s.release(src)
		}
	}
	defer release()
	welcome := &Msg{Type: msgWelcome, Proto: ProtoVersion, Version: s.o.Version, Session: id, Env: &s.env}
	if s.o.Token != "" {
		welcome.Nonce = newNonce()
		if len(h.Nonce) == nonceLen {
			welcome.Proof = authProof(s.o.Token, "server", h.Nonce, welcome.Nonce)
		}
	}
	if err := writeMsg(c, welcome); err != nil {
		return
	}
	m, err := readMsg(c, msgSetup)
	if err != nil || m.Setup == nil {
		s.logf("%s: bad setup: %v", peer, err)
		return
	}
	if s.o.Token != "" && !validProof(s.o.Token, "client", welcome.Nonce, h.Nonce, m.Proof) {
		s.logf("%s: refused: wrong or missing token", peer)
		_ = writeMsg(c, &Msg{Type: msgError, Code: codeAuth,
			Error: "authentication failed: this server requires a token; give the client the server's --token (or CNIBENCH_TOKEN)"})
		return
	}
	if err := s.checkSetup(m.Setup); err != nil {
		_ = writeMsg(c, &Msg{Type: msgError, Error: err.Error()})
		return
	}
	ss := newSession(s, id, *m.Setup)
	ss.ctl = c
	s.mu.Lock()
	s.sessions[id] = ss
	s.mu.Unlock()
	defer func() {
		ss.abort()
		ss.wait()
		s.mu.Lock()
		delete(s.sessions, id)
		s.mu.Unlock()
	}()
	st := m.Setup
	s.logf("%s: session %d: %s msg %d B parallel %d for %v", peer, id, st.Test, st.MsgSize, st.Parallel, time.Duration(st.DurationNs))
	// The whole session, not only each read, is bounded in time.
	_ = c.SetDeadline(time.Now().Add(time.Duration(st.DurationNs+st.WarmupNs) + 30*time.Second))
	if err := writeMsg(c, &Msg{Type: msgReady}); err != nil {
		return
	}
	if _, err := readMsg(c, msgStart); err != nil {
		s.logf("%s: session %d ended before start: %v", peer, id, err)
		return
	}
	a := ss.snapshot()
	if err := writeMsg(c, &Msg{Type: msgStarted}); err != nil {
		s.logf("%s: session %d: send started: %v", peer, id, err)
		return
	}
	stop, err := readMsg(c, msgStop)
	if err != nil {
		s.logf("%s: session %d ended before stop: %v", peer, id, err)
		return
	}
	rep := ss.finish(a, stop.UDPSent)
	// The slot is free once the report is ready: a client that starts its
	// next session as soon as it reads this one's report must not find the
	// server "busy" with a session that is only tearing down.
	release()
	if err := writeMsg(c, &Msg{Type: msgReport, Report: rep}); err != nil {
		s.logf("%s: session %d: send report: %v", peer, id, err)
	}
}

func (s *Server) checkSetup(st *Setup) error {
	if !result.ValidTest(st.Test) {
		return fmt.Errorf("unknown test %q (known: %v)", st.Test, result.Tests)
	}
	if err := limits.CheckSize(st.Test, st.MsgSize); err != nil {
		return err
	}
	if st.Parallel < 1 || st.Parallel > MaxParallel {
		return fmt.Errorf("parallel %d out of range 1-%d", st.Parallel, MaxParallel)
	}
	if st.DurationNs <= 0 || st.WarmupNs < 0 {
		return errors.New("duration must be > 0 and warmup ≥ 0")
	}
	// Each term is bounded before they are added, so a hostile setup
	// cannot overflow the sum into a negative (and so accepted) duration.
	limit := int64(s.o.MaxSession)
	if st.DurationNs > limit || st.WarmupNs > limit || st.DurationNs+st.WarmupNs > limit {
		return fmt.Errorf("duration+warmup %v exceeds this server's session limit %v",
			time.Duration(st.DurationNs)+time.Duration(st.WarmupNs), s.o.MaxSession)
	}
	if math.IsNaN(st.RateBps) || math.IsInf(st.RateBps, 0) || st.RateBps < 0 {
		return fmt.Errorf("rate %v: must be a finite number ≥ 0", st.RateBps)
	}
	return nil
}

// MaxParallel bounds --parallel (limits.MaxParallel).
const MaxParallel = limits.MaxParallel
