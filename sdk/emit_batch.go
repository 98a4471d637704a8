package sdk

import (
	stdctx "context"

	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
)

// EmitBatch is the feature a plugin accepts (DescribeResponse.accepts) to
// get its notifications in batches; every plugin built with this SDK does.
const EmitBatch = "emit-batch"

// EmitBatch implements the protocol: each notification goes to its
// listener in the batch's order, as single Emits would; one that fails is
// reported by its index and does not stop the rest.
func (s *server) EmitBatch(ctx stdctx.Context, req *pluginv1.EmitBatchRequest) (*pluginv1.EmitBatchResponse, error) {
	out := &pluginv1.EmitBatchResponse{}
	for i, e := range req.GetEmits() {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err := s.emit(ctx, e); err != nil {
			out.Failures = append(out.Failures, &pluginv1.EmitFailure{Index: uint32(i), Error: ErrorToProto(err)})
		}
	}
	return out, nil
}
