package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TLSServer is a redis-server that serves TLS on one port and plain
// text on another, with certificates made by [RequireTLS].
type TLSServer struct {
	*Server        // Addr is the plain-text port
	TLSAddr string // the TLS port's host:port

	// CAFile holds the certificate authority that signed the server's
	// and the client's certificates, in PEM; CertFile and KeyFile the
	// client's certificate and key, which the server accepts.
	CAFile, CertFile, KeyFile string
	// CA and Client are the same, loaded.
	CA     *x509.CertPool
	Client tls.Certificate
}

// RequireTLS starts a server for t alone with a TLS port, its certificate
// signed by a certificate authority made for it, valid for 127.0.0.1 and
// localhost. By default the server accepts clients with or without a
// certificate; extra arguments go to redis-server's command line, for
// example "--tls-auth-clients", "yes".
func RequireTLS(t testing.TB, args ...string) *TLSServer {
	t.Helper()
	skipUnlessInstalled(t)
	dir := t.TempDir()
	s := &TLSServer{
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "client.pem"),
		KeyFile:  filepath.Join(dir, "client-key.pem"),
	}
	ca, caKey, err := newCert(nil, nil, x509.ExtKeyUsageAny)
	if err != nil {
		t.Fatal(err)
	}
	server, serverKey, err := newCert(ca, caKey, x509.ExtKeyUsageServerAuth)
	if err != nil {
		t.Fatal(err)
	}
	client, clientKey, err := newCert(ca, caKey, x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	serverFile, serverKeyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	for file, block := range map[string]*pem.Block{
		s.CAFile:      {Type: "CERTIFICATE", Bytes: ca.Raw},
		serverFile:    {Type: "CERTIFICATE", Bytes: server.Raw},
		serverKeyFile: keyBlock(serverKey),
		s.CertFile:    {Type: "CERTIFICATE", Bytes: client.Raw},
		s.KeyFile:     keyBlock(clientKey),
	} {
		if block == nil {
			t.Fatal("redistest: cannot encode a private key")
		}
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s.CA = x509.NewCertPool()
	s.CA.AddCert(ca)
	if s.Client, err = tls.LoadX509KeyPair(s.CertFile, s.KeyFile); err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	s.TLSAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s.Server = Require(t, append([]string{
		"--tls-port", strconv.Itoa(port),
		"--tls-cert-file", serverFile,
		"--tls-key-file", serverKeyFile,
		"--tls-ca-cert-file", s.CAFile,
		"--tls-auth-clients", "optional",
	}, args...)...)
	return s
}

// newCert makes a certificate for usage, signed by parent with parentKey,
// or a self-signed certificate authority when parent is nil, and returns
// it with its private key.
func newCert(parent *x509.Certificate, parentKey *ecdsa.PrivateKey, usage x509.ExtKeyUsage) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "redistest " + strconv.Itoa(int(usage))},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	signer := key
	if parent == nil {
		tmpl.Subject.CommonName = "redistest CA"
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.ExtKeyUsage, tmpl.IPAddresses, tmpl.DNSNames = nil, nil, nil
		parent = tmpl
	} else {
		signer = parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// keyBlock is key as a PKCS #8 PEM block, or nil if it cannot be encoded.
func keyBlock(key *ecdsa.PrivateKey) *pem.Block {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil
	}
	return &pem.Block{Type: "PRIVATE KEY", Bytes: der}
}
