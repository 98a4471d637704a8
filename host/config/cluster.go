package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dsh-go/dsh/internal/lazyregexp"
)

// ClusterConfig is the cluster: key: the NATS JetStream engine several
// hosts share sessions on, and who this host is among them. Unset (no
// nats.url), dsh runs alone, with no engine at all.
type ClusterConfig struct {
	NATS ClusterNATS `koanf:"nats"`
	// HostID names this host, unique among the live hosts; default the
	// machine's hostname, with characters a NATS subject token cannot
	// hold replaced by '-'.
	HostID string `koanf:"host_id"`
	// Group is this host's group; ClaimGroup, when set, is the only group
	// whose hosts take sessions nobody owns (the others forward them).
	Group      string `koanf:"group"`
	ClaimGroup string `koanf:"claim_group"`
	// LeaseTTL is how long a dead host's sessions stay owned by it;
	// default 30s.
	LeaseTTL time.Duration `koanf:"lease_ttl"`
	// Replicas is how many NATS servers keep each session log: 1, 3 or 5;
	// default 1.
	Replicas int `koanf:"replicas"`
	// Stream holds the session logs; default DSH_SESSIONS.
	Stream string `koanf:"stream"`
}

// ClusterNATS says how to reach the engine.
type ClusterNATS struct {
	// URL is a NATS server, or a comma-separated list of a cluster's.
	URL string `koanf:"url"`
	// CredentialsFile is a NATS .creds file; empty for a server without
	// authentication. Relative to the config file's directory.
	CredentialsFile string `koanf:"credentials_file"`
}

// Defaults of the cluster: key.
const (
	DefaultClusterStream   = "DSH_SESSIONS"
	DefaultClusterLeaseTTL = 30 * time.Second
	// ClusterEntryID is the id of the session.nats entry the cluster: key
	// adds to the root plugins.
	ClusterEntryID = "cluster"
)

// Enabled reports whether the config joins a cluster.
func (c ClusterConfig) Enabled() bool { return c.NATS.URL != "" }

var (
	subjectToken = lazyregexp.New(`^[A-Za-z0-9_-]+$`)
	notInToken   = lazyregexp.New(`[^A-Za-z0-9_-]+`)
)

// defaultHostID is the hostname as a subject token.
func defaultHostID() string {
	name, _ := os.Hostname()
	id := strings.Trim(notInToken.ReplaceAllString(name, "-"), "-")
	if id == "" {
		id = "dsh"
	}
	return id
}

// checkCluster fills the cluster: key's defaults, reports its mistakes
// and, when it is set, adds the session.nats entry that keeps the
// sessions in the cluster's stream. It runs before the plugin entries are
// checked, so the entry is decoded like any other.
func (c *Config) checkCluster(p *problems) {
	cl := &c.Cluster
	if !cl.Enabled() {
		if cl.HostID != "" || cl.Group != "" || cl.ClaimGroup != "" || cl.NATS.CredentialsFile != "" {
			p.add("cluster.nats.url", "the cluster: key has no nats.url; name the NATS server (e.g. nats://127.0.0.1:4222), or remove cluster: to run alone")
		}
		return
	}
	if cl.HostID == "" {
		cl.HostID = defaultHostID()
	}
	if cl.Stream == "" {
		cl.Stream = DefaultClusterStream
	}
	if cl.LeaseTTL == 0 {
		cl.LeaseTTL = DefaultClusterLeaseTTL
	}
	if cl.Replicas == 0 {
		cl.Replicas = 1
	}
	before := len(p.list)
	for _, f := range []struct{ key, value string }{
		{"host_id", cl.HostID}, {"group", cl.Group}, {"claim_group", cl.ClaimGroup}, {"stream", cl.Stream},
	} {
		if f.value != "" && !subjectToken.MatchString(f.value) {
			p.add("cluster."+f.key, fmt.Sprintf("%q cannot name a NATS subject token; use letters, digits, '_' and '-'", f.value))
		}
	}
	if cl.LeaseTTL < time.Second {
		p.add("cluster.lease_ttl", fmt.Sprintf("lease_ttl is %s; use at least 1s (a lease renews every third of it), e.g. 30s", cl.LeaseTTL))
	}
	if cl.Replicas != 1 && cl.Replicas != 3 && cl.Replicas != 5 {
		p.add("cluster.replicas", fmt.Sprintf("replicas is %d; JetStream keeps 1, 3 or 5 copies", cl.Replicas))
	}
	for i, e := range c.Plugins {
		if IsSessionStore(&e) {
			p.add(fmt.Sprintf("plugins[%d]", i), fmt.Sprintf(
				"a cluster keeps its sessions in JetStream (cluster: adds a session.nats entry with id %q); remove this %s entry, or remove cluster: to run alone", ClusterEntryID, e.Use))
		}
	}
	if len(p.list) > before {
		return
	}
	creds := cl.NATS.CredentialsFile
	if creds != "" && !filepath.IsAbs(creds) {
		dir := c.wd
		if c.File != "" {
			dir = filepath.Dir(c.File)
		}
		creds = filepath.Join(dir, creds)
	}
	c.Plugins = append(c.Plugins, Entry{ID: ClusterEntryID, Use: "session.nats", Config: map[string]any{
		"url":              cl.NATS.URL,
		"credentials_file": creds,
		"stream":           cl.Stream,
		"replicas":         cl.Replicas,
		"lease_ttl":        cl.LeaseTTL.String(),
		"host_id":          cl.HostID,
	}})
}
