package check

import (
	"os"
	"strings"
	"testing"
)

func TestEveryManifestDecodesStrictly(t *testing.T) {
	objs, err := DecodeDir("..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, o := range objs {
		seen[o.Kind] = true
	}
	for _, k := range []string{"Namespace", "DaemonSet", "Deployment", "Service", "ConfigMap"} {
		if !seen[k] {
			t.Errorf("no %s among the manifests: %v", k, seen)
		}
	}
}

// A misspelt field, a value of the wrong type, a duplicated key: each fails, naming it.
func TestAMisspeltOrMistypedFieldFails(t *testing.T) {
	text, err := os.ReadFile("../agent-daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to, want string }{
		{"hostNetwork: true", "hostNetwrok: true", "hostNetwrok"},
		{"hostNetwork: true", "hostNetwork: yes please", "hostNetwork"},
		{"dnsPolicy: ClusterFirstWithHostNet", "dnsPolicy: ClusterFirstWithHostNet\n      dnsPolicy: Default", "dnsPolicy"},
	} {
		bad := strings.Replace(string(text), c.from, c.to, 1)
		if bad == string(text) {
			t.Fatalf("%q is not in the manifest", c.from)
		}
		_, err := Decode("agent-daemonset.yaml", []byte(bad))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error naming %q, got %v", c.to, c.want, err)
		}
	}
}
