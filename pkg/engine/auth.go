package engine

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"net"
)

// Token authentication. Client and server share a secret (--token or
// CNIBENCH_TOKEN); it never crosses the wire. Each side sends a fresh random
// nonce (the client in hello, the server in welcome) and proves the secret
// with an HMAC-SHA256 over both nonces and its role:
//
//	welcome.proof = HMAC(token, label | "server" | client nonce | server nonce)
//	setup.proof   = HMAC(token, label | "client" | server nonce | client nonce)
//
// The server accepts a setup only with a valid client proof (compared in
// constant time), so an unauthenticated peer can open a control connection
// but never a session; the client checks the server's proof, so it never
// reports numbers from a server that does not hold the token. Fresh nonces
// on both sides make a recorded exchange useless for a replay. Data streams
// attach to a session by its id, which is random (not a counter), so a
// third party cannot join an authenticated session by guessing a small
// number while it runs.

// TokenEnv is the environment variable server and client read the token
// from when --token is not given (a variable does not show in ps).
const TokenEnv = "CNIBENCH_TOKEN"

// nonceLen is the size of each side's random challenge.
const nonceLen = 32

// authLabel separates cnibench's MACs from any other use of the same secret.
const authLabel = "cnibench-auth-v1\x00"

// ErrAuth is returned (wrapped) when the two sides do not share a token: the
// client's proof was wrong, the server proved none, or one side has none.
var ErrAuth = errors.New("authentication failed")

// ErrBusy is returned (wrapped) when the server refuses a session because it
// is at its --max-sessions or per-source limit.
var ErrBusy = errors.New("server busy")

// Error codes carried in an error message, so the client can tell a refusal
// it should report as such (errors.Is) from any other failure.
const (
	codeAuth = "auth"
	codeBusy = "busy"
)

func newNonce() []byte {
	b := make([]byte, nonceLen)
	if _, err := rand.Read(b); err != nil {
		// crypto/rand does not fail on Linux ≥ 3.17 (getrandom); if it
		// ever does, refusing to authenticate is the only safe answer.
		panic("crypto/rand: " + err.Error())
	}
	return b
}

func authProof(token, role string, first, second []byte) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(authLabel))
	m.Write([]byte(role))
	m.Write(first)
	m.Write(second)
	return m.Sum(nil)
}

func validProof(token, role string, first, second, got []byte) bool {
	return len(got) == sha256.Size && hmac.Equal(got, authProof(token, role, first, second))
}

// Insecure says whether a server listening on ip without a token can be
// driven by any host that reaches it.
func Insecure(ip net.IP, token string) bool {
	return token == "" && !ip.IsLoopback()
}
