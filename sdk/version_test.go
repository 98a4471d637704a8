package sdk_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/sdk"
)

// TestVersionIsPublished: a new sdk.Version must reach the compatibility
// table of docs/plugins.md and the version dsh's go.mod requires, or
// authors read one version and build against another.
func TestVersionIsPublished(t *testing.T) {
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(sdk.Version) {
		t.Fatalf("sdk.Version %q is not MAJOR.MINOR.PATCH, which the module's tags sdk/vX.Y.Z need", sdk.Version)
	}
	minor := sdk.Version[:strings.LastIndex(sdk.Version, ".")]
	guide, err := os.ReadFile("../docs/plugins.md")
	if err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf("| %s.x | %d |", minor, sdk.ProtocolVersion)
	if !strings.Contains(string(guide), row) {
		t.Fatalf("docs/plugins.md's table of versions has no row starting %q", row)
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if req := "github.com/dsh-go/dsh/sdk v" + sdk.Version + "\n"; !strings.Contains(string(mod), req) {
		t.Fatalf("dsh's go.mod does not require %q", strings.TrimSpace(req))
	}
}
