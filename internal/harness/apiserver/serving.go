package apiserver

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

// ServingCertificate is the key pair the first kube-apiserver of the cluster serves with (valid
// for 127.0.0.1 and localhost, signed by CAData), for a test server that must stand where a
// kube-apiserver stands, e.g. an HTTP-level fault injector in front of one.
func (c *Cluster) ServingCertificate() (tls.Certificate, error) {
	cert, key, err := c.pki.servingPair(0)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.LoadX509KeyPair(cert, key)
}

// Certificate is the serving certificate this server presents (issued when it first started,
// the same after a restart): a client behind a balancer that passes TLS through tells the
// servers apart by it, e.g. by the SHA-256 of its DER.
func (s *Server) Certificate() (*x509.Certificate, error) {
	certFile, _, err := s.cluster.pki.servingPair(s.index)
	if err != nil {
		return nil, err
	}
	return leafOf(certFile)
}

// leafOf parses the first certificate of a PEM file.
func leafOf(certFile string) (*x509.Certificate, error) {
	data, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("apiserver: %s holds no certificate", certFile)
	}
	return x509.ParseCertificate(block.Bytes)
}
