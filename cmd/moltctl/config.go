package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/moltproject/molt/trust"
)

// fileConfig is moltctl's configuration file: where the coordinator is,
// how to trust it, and the operator's credential. It lives at
// $XDG_CONFIG_HOME/molt/config.yaml (~/.config/molt/config.yaml), or where
// --config or MOLTCONFIG say. Flags and environment variables override it.
type fileConfig struct {
	// Server is the coordinator URL, or members' URLs separated by commas.
	Server string `yaml:"server"`
	// CAFile is the cluster CA certificate (the coordinator's
	// <data-dir>/tls/ca.crt).
	CAFile string `yaml:"caFile"`
	// Token is an API token; TokenFile a file holding one (e.g. the
	// coordinator's <data-dir>/admin.token).
	Token     string `yaml:"token"`
	TokenFile string `yaml:"tokenFile"`
}

// defaultConfigPath is where moltctl looks without --config or MOLTCONFIG.
func defaultConfigPath() string {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "molt", "config.yaml")
}

// loadConfig reads the file at path; a missing file at the default path is
// an empty configuration, a missing file that was named is an error.
func loadConfig(path string, named bool) (fileConfig, error) {
	var fc fileConfig
	if path == "" {
		return fc, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !named {
		return fc, nil
	}
	if err != nil {
		return fc, fmt.Errorf("config: %w", err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil {
		return fc, fmt.Errorf("config %s: %w", path, err)
	}
	return fc, nil
}

// httpClient trusts the CA in caFile (nil: the system's roots).
func httpClient(caFile string) (*http.Client, error) {
	if caFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	cert, err := trust.ParseCert(b)
	if err != nil {
		return nil, fmt.Errorf("--ca-file %s: %w", caFile, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: trust.ClientConfig(pool, nil)}}, nil
}

// readToken reads a token file (surrounding space trimmed).
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
