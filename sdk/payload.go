package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/dsh-go/dsh/sdk/errs"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// badPayload says a call carried no payload of the field its event uses:
// the host and the plugin disagree about the protocol.
func badPayload(call Call, field string) error {
	return errs.New(errs.InvalidArgument, fmt.Sprintf(
		"the payload of %q has no %s field; the host and this plugin speak different versions of the dsh plugin protocol — rebuild the plugin against the host's sdk",
		call.Event, field)).WithReason("sdk/payload-mismatch")
}

// JSON renders a payload or result in the JSON form EVENTS.md shows
// (protojson with the .proto's field names, compact), for logs and
// debugging.
func JSON(m proto.Message) []byte {
	b, _ := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	// protojson varies its spacing on purpose; logs and tests want one form.
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}
