//! Health probes: a plain HTTP/1.1 GET over a tokio `TcpStream` (`http://`) or over
//! rustls (`https://`, the server's certificate checked against the Mozilla roots of
//! `webpki-roots` plus any roots the host was given: [`ProbeTls`]), within a timeout.
//! Up or down is the core's probe rule (`rota_core::probe_is_up`: 2xx is up;
//! redirects are not followed, so a 3xx is down), the same on every host. A URL this host cannot probe answers "unsupported" with a
//! reason, and the host reports it as an event.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

/// Whom `https://` probes trust: the Mozilla root certificates, plus extra roots (a
/// private CA, a self-signed engine). Cheap to clone.
#[derive(Clone)]
pub struct ProbeTls {
    config: Arc<ClientConfig>,
}

impl std::fmt::Debug for ProbeTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeTls").finish_non_exhaustive()
    }
}

impl ProbeTls {
    /// The Mozilla roots and `extra` (DER certificates).
    pub fn new(extra: &[CertificateDer<'_>]) -> Result<ProbeTls, String> {
        let mut roots = RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for cert in extra {
            roots
                .add(cert.clone().into_owned())
                .map_err(|e| format!("not a usable root certificate: {e}"))?;
        }
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(ProbeTls {
            config: Arc::new(config),
        })
    }

    /// The Mozilla roots and every certificate of a PEM text (`-----BEGIN
    /// CERTIFICATE-----` blocks).
    pub fn with_roots_pem(pem: &[u8]) -> Result<ProbeTls, String> {
        let extra = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("cannot read the PEM certificates: {e}"))?;
        if extra.is_empty() {
            return Err("no certificate in the PEM text".into());
        }
        ProbeTls::new(&extra)
    }

    /// The Mozilla roots only, built once per process.
    pub fn shared() -> Result<ProbeTls, String> {
        static SHARED: OnceLock<Result<ProbeTls, String>> = OnceLock::new();
        SHARED.get_or_init(|| ProbeTls::new(&[])).clone()
    }
}

/// A parsed probe URL.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    tls: bool,
    host: String,
    port: u16,
    path: String,
}

/// The answer to one probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// A 2xx status.
    Up(u16),
    /// Another status, or no answer: why.
    Down(String),
    /// This host cannot probe the URL (a scheme it does not speak, a malformed URL).
    Unsupported(String),
}

impl ProbeOutcome {
    pub fn is_up(&self) -> bool {
        matches!(self, ProbeOutcome::Up(_))
    }
}

/// `http[s]://host[:port][/path]`.
fn parse_url(url: &str) -> Result<Target, String> {
    let (tls, rest) = if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else {
        let scheme = url.split_once("://").map_or("none", |(s, _)| s);
        return Err(format!(
            "scheme '{scheme}' is not supported by this host's probe (http:// and https:// only)"
        ));
    };
    let default_port = if tls { "443" } else { "80" };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    if authority.is_empty() {
        return Err(format!("no host in '{url}'"));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("bad IPv6 host in '{url}'"))?;
        let port = after.strip_prefix(':').unwrap_or(default_port);
        (host.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host.to_string(), port),
            None => (authority.to_string(), default_port),
        }
    };
    let port: u16 = port.parse().map_err(|_| format!("bad port in '{url}'"))?;
    Ok(Target {
        tls,
        host,
        port,
        path: path.to_string(),
    })
}

/// GETs `url` (no redirect followed); `Up` when the core's probe rule says so (2xx).
/// Never longer than `timeout`. `https://` servers are
/// checked against the Mozilla roots ([`ProbeTls::shared`]).
pub async fn probe(url: &str, timeout: Duration) -> ProbeOutcome {
    match ProbeTls::shared() {
        Ok(tls) => probe_with(url, timeout, &tls).await,
        Err(reason) => ProbeOutcome::Unsupported(reason),
    }
}

/// [`probe`], trusting `tls` for `https://`.
pub async fn probe_with(url: &str, timeout: Duration, tls: &ProbeTls) -> ProbeOutcome {
    let target = match parse_url(url) {
        Ok(target) => target,
        Err(reason) => return ProbeOutcome::Unsupported(reason),
    };
    match tokio::time::timeout(timeout, get(&target, tls)).await {
        Ok(Ok(status)) if rota_core::probe_is_up(status) => ProbeOutcome::Up(status),
        Ok(Ok(status)) => ProbeOutcome::Down(format!("HTTP {status}")),
        Ok(Err(e)) => ProbeOutcome::Down(e.to_string()),
        Err(_) => ProbeOutcome::Down(format!("no answer within {} ms", timeout.as_millis())),
    }
}

async fn get(target: &Target, tls: &ProbeTls) -> std::io::Result<u16> {
    let Target {
        tls: use_tls,
        host,
        port,
        path,
    } = target;
    let stream = TcpStream::connect((host.as_str(), *port)).await?;
    if *use_tls {
        let name = ServerName::try_from(host.clone()).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("bad host '{host}': {e}"),
            )
        })?;
        let stream = TlsConnector::from(tls.config.clone())
            .connect(name, stream)
            .await?;
        get_status(stream, host, *port, path).await
    } else {
        get_status(stream, host, *port, path).await
    }
}

async fn get_status<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    host: &str,
    port: u16,
    path: &str,
) -> std::io::Result<u16> {
    let host_header = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: rota-host\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    // The status line is all we need: "HTTP/1.1 200 OK\r\n".
    let mut head = Vec::with_capacity(64);
    let mut buf = [0u8; 256];
    while !head.windows(2).any(|w| w == b"\r\n") && head.len() < 4096 {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let line = line.lines().next().unwrap_or_default();
    let mut parts = line.split_whitespace();
    match (
        parts.next(),
        parts.next().and_then(|s| s.parse::<u16>().ok()),
    ) {
        (Some(version), Some(status)) if version.starts_with("HTTP/") => Ok(status),
        _ => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not an HTTP answer: {line:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(tls: bool, host: &str, port: u16, path: &str) -> Target {
        Target {
            tls,
            host: host.into(),
            port,
            path: path.into(),
        }
    }

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("http://127.0.0.1:8080/health").unwrap(),
            target(false, "127.0.0.1", 8080, "/health")
        );
        assert_eq!(
            parse_url("http://localhost").unwrap(),
            target(false, "localhost", 80, "/")
        );
        assert_eq!(
            parse_url("http://[::1]:9/x?y").unwrap(),
            target(false, "::1", 9, "/x?y")
        );
        assert_eq!(
            parse_url("https://a/health").unwrap(),
            target(true, "a", 443, "/health")
        );
        assert!(parse_url("ftp://a/health").is_err());
        assert!(parse_url("http://a:notaport/").is_err());
    }

    /// A loopback HTTPS server with a self-signed certificate for 127.0.0.1 that
    /// answers every request with `status`; its certificate as PEM.
    async fn https_server(status: u16) -> (u16, String) {
        use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
        use tokio_rustls::rustls::ServerConfig;

        let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()])
            .expect("a certificate");
        let pem = cert.cert.pem();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert.cert.der().clone()], key)
            .expect("server config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut buf = [0u8; 1024];
                    let _ = tls.read(&mut buf).await;
                    let answer = format!("HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n");
                    let _ = tls.write_all(answer.as_bytes()).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        (port, pem)
    }

    #[tokio::test]
    async fn https_probes_check_the_certificate() {
        let (port, pem) = https_server(204).await;
        let url = format!("https://127.0.0.1:{port}/health");
        let timeout = Duration::from_secs(10);
        let trusted = ProbeTls::with_roots_pem(pem.as_bytes()).expect("the test root");
        assert_eq!(
            probe_with(&url, timeout, &trusted).await,
            ProbeOutcome::Up(204)
        );
        // The Mozilla roots alone do not vouch for a self-signed certificate.
        match probe(&url, timeout).await {
            ProbeOutcome::Down(reason) => {
                assert!(reason.to_lowercase().contains("certificate"), "{reason}")
            }
            other => panic!("expected down, got {other:?}"),
        }
        let (port, pem) = https_server(503).await;
        let url = format!("https://127.0.0.1:{port}/health");
        let trusted = ProbeTls::with_roots_pem(pem.as_bytes()).expect("the test root");
        assert_eq!(
            probe_with(&url, timeout, &trusted).await,
            ProbeOutcome::Down("HTTP 503".into())
        );
        assert!(ProbeTls::with_roots_pem(b"not pem").is_err());
        // A redirect is not followed, and is down (the core's probe rule).
        let (port, pem) = https_server(302).await;
        let url = format!("https://127.0.0.1:{port}/health");
        let trusted = ProbeTls::with_roots_pem(pem.as_bytes()).expect("the test root");
        assert_eq!(
            probe_with(&url, timeout, &trusted).await,
            ProbeOutcome::Down("HTTP 302".into())
        );
    }
}
