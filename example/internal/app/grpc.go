package app

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/grpclimit"
)

// GenerateMethod is the gRPC twin of POST /v1/generate: it takes a
// google.protobuf.Struct with the numbers "tokens" and "hold_ms" and
// answers one with "tokens", as the HTTP route takes its query and
// answers its JSON. No .proto is compiled: the service is described
// here, its messages are protobuf's own.
const GenerateMethod = "/ratelimit.example.Generator/Generate"

// NewGRPCServer returns a gRPC server of GenerateMethod under a.Gen, the
// Limiter of POST /v1/generate: the same limits, keyed by the metadata
// x-api-key as the route by X-API-Key, so that a key's calls and
// requests spend one budget. A call whose parameters are out of bounds
// is refused before the Limiter, as the route's request is.
func (a *App) NewGRPCServer() *grpc.Server {
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(checkGenerateCall, grpclimit.UnaryServerInterceptor(a.Gen)))
	srv.RegisterService(&generatorService, struct{}{})
	return srv
}

var generatorService = grpc.ServiceDesc{
	ServiceName: "ratelimit.example.Generator",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Generate",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(structpb.Struct)
			if err := dec(in); err != nil {
				return nil, err
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: GenerateMethod}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return generateCall(ctx, req.(*structpb.Struct))
			})
		},
	}},
}

// callParams returns in's tokens and hold_ms, and whether both are whole
// numbers within the route's bounds.
func callParams(in *structpb.Struct) (tokens, hold int, ok bool) {
	t, h := in.GetFields()["tokens"].GetNumberValue(), in.GetFields()["hold_ms"].GetNumberValue()
	tokens, hold = int(t), int(h)
	return tokens, hold, float64(tokens) == t && float64(hold) == h && tokens >= 0 && tokens <= maxTokens && hold >= 0 && hold <= maxHold
}

// checkGenerateCall refuses a call of GenerateMethod whose parameters are
// out of bounds, before the Limiter counts it.
func checkGenerateCall(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if in, ok := req.(*structpb.Struct); ok && info.FullMethod == GenerateMethod {
		if _, _, ok := callParams(in); !ok {
			return nil, status.Error(codes.InvalidArgument, "tokens must be 0 to 100000 and hold_ms 0 to 10000")
		}
	}
	return next(ctx, req)
}

// generateCall is Generate over gRPC: it works for hold_ms, reports the
// tokens as the call's usage, and answers them.
func generateCall(ctx context.Context, in *structpb.Struct) (*structpb.Struct, error) {
	tokens, hold, _ := callParams(in)
	t := time.NewTimer(time.Duration(hold) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	ratelimit.Charge(ctx, tokens)
	return structpb.NewStruct(map[string]any{"tokens": tokens})
}
