package driver

import "context"

type clientStartedKey struct{}

// WithClientStarted returns a context whose Measure and MeasureClient call
// f right after the client process started: the time the tool's warmup
// begins. --profile uses it to sample the measured window only (from
// warmup's end), not the server's start or the warmup.
func WithClientStarted(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, clientStartedKey{}, f)
}

// ClientStarted calls the function WithClientStarted put in ctx, if any
// (Measure and MeasureClient call it; a test measurer may too).
func ClientStarted(ctx context.Context) {
	if f, ok := ctx.Value(clientStartedKey{}).(func()); ok && f != nil {
		f()
	}
}
