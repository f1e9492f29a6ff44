package store

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// tlsProblem returns the misconfiguration for a TLS error in err, or nil.
func tlsProblem(err error) *misconfiguration {
	if err == nil {
		return nil
	}
	switch {
	case errors.As(err, new(x509.UnknownAuthorityError)):
		return &misconfiguration{problem: "Redis's TLS certificate is signed by an authority the client does not trust",
			fix: "give the client the certificate of the authority that signed it (tls.Config.RootCAs)", err: err}
	case errors.As(err, new(x509.HostnameError)):
		return &misconfiguration{problem: "Redis's TLS certificate does not name the host the client dials",
			fix: "dial a name or address the certificate holds, or set tls.Config.ServerName to one", err: err}
	case errors.As(err, new(x509.CertificateInvalidError)):
		return &misconfiguration{problem: "Redis's TLS certificate is not valid now (expired, not yet valid, or not for a server)",
			fix: "renew the server's certificate, or check the clocks", err: err}
	case errors.As(err, new(*tls.CertificateVerificationError)):
		return &misconfiguration{problem: "the client rejected Redis's TLS certificate",
			fix: "check the server's certificate and the client's tls.Config.RootCAs", err: err}
	case errors.As(err, new(tls.RecordHeaderError)):
		return &misconfiguration{problem: "the server answered a TLS handshake in plain text: this is not a TLS port",
			fix: "use redis:// rather than rediss:// (no TLSConfig), or the server's TLS port", err: err}
	case errors.As(err, new(tls.AlertError)) || strings.Contains(err.Error(), "remote error: tls:"):
		return &misconfiguration{problem: "Redis refused the TLS handshake",
			fix: "if it asks for client certificates, give the client one its authority signed (tls.Config.Certificates)", err: err}
	}
	return nil
}

// otherWayTimeout bounds tryOtherWay's dial and exchange.
const otherWayTimeout = time.Second

// withTLSHint returns err, which Check got through c, as a misconfiguration
// when the server and c speak TLS and plain text, or the handshake fails (a
// missing client certificate), which otherwise look like an outage.
func withTLSHint(err error, c RedisClient) error {
	if _, isReply := replyText(err); err == nil || isReply || errors.Is(err, ErrMisconfigured) {
		return err
	}
	var addr string
	var useTLS *tls.Config
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		if _, _, splitErr := net.SplitHostPort(o.Addr); splitErr != nil || (o.Network != "" && o.Network != "tcp") {
			return err // a Unix socket, or a Sentinel's failover client
		}
		addr, useTLS = o.Addr, o.TLSConfig
	case *redis.ClusterClient:
		o := c.Options()
		if len(o.Addrs) == 0 {
			return err
		}
		addr, useTLS = o.Addrs[0], o.TLSConfig
	default:
		return err
	}
	if useTLS != nil {
		if ce := tlsProblem(tryHandshake(addr, useTLS)); ce != nil {
			return ce
		}
	}
	switch speaks := tryOtherWay(addr, useTLS == nil); {
	case useTLS != nil && speaks:
		return &misconfiguration{problem: "the server at " + addr + " answered in plain text: it is not a TLS port",
			fix: "use redis:// rather than rediss:// (no TLSConfig), or the server's TLS port", err: err}
	case useTLS == nil && speaks:
		return &misconfiguration{problem: "the server at " + addr + " speaks TLS, and the client plain text",
			fix: "use rediss:// rather than redis:// (set TLSConfig)", err: err}
	}
	return err
}

// tryHandshake dials addr with TLS as config says, and returns what the
// handshake, or the server right after it, said against it. It reads for
// a moment rather than writes: with TLS 1.3 a server refuses a missing
// client certificate after the handshake, and a write may see a reset.
func tryHandshake(addr string, config *tls.Config) error {
	conn, err := net.DialTimeout("tcp", addr, otherWayTimeout)
	if err != nil {
		return nil
	}
	defer conn.Close()
	c := config.Clone()
	if c.ServerName == "" {
		c.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tc := tls.Client(conn, c)
	_ = tc.SetDeadline(time.Now().Add(otherWayTimeout))
	if err := tc.HandshakeContext(context.Background()); err != nil {
		return err
	}
	_ = tc.SetReadDeadline(time.Now().Add(otherWayTimeout / 2))
	var b [1]byte
	_, err = tc.Read(b[:])
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil // the server took the handshake and waits for commands
	}
	return err
}

// tryOtherWay dials addr and reports whether it answers a TLS handshake,
// when withTLS is set, or a plain-text PING otherwise.
func tryOtherWay(addr string, withTLS bool) bool {
	conn, err := net.DialTimeout("tcp", addr, otherWayTimeout)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(otherWayTimeout))
	if withTLS {
		// Not whether it is trusted: a handshake that completes, or ends
		// in a TLS alert (a client certificate asked for), says it speaks TLS.
		tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true})
		err := tc.HandshakeContext(context.Background())
		return err == nil || errors.As(err, new(tls.AlertError)) || strings.Contains(err.Error(), "remote error: tls:")
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && (strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-"))
}
