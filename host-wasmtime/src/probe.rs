//! Health probes: a plain HTTP/1.1 GET over a tokio `TcpStream`, up when the status is
//! 2xx, within a timeout. `https://` is not supported by this host (no TLS stack for
//! what is, on the roster seed's machines, a local engine's `/health`): such a probe
//! answers "down" with a reason, and the host reports it as an event.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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

/// `http://host[:port][/path]` → (host, port, path).
fn parse_http_url(url: &str) -> Result<(String, u16, String), String> {
    let Some(rest) = url.strip_prefix("http://") else {
        let scheme = url.split_once("://").map_or("none", |(s, _)| s);
        return Err(format!(
            "scheme '{scheme}' is not supported by this host's probe (http:// only)"
        ));
    };
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
        let port = after.strip_prefix(':').unwrap_or("80");
        (host.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host.to_string(), port),
            None => (authority.to_string(), "80"),
        }
    };
    let port: u16 = port.parse().map_err(|_| format!("bad port in '{url}'"))?;
    Ok((host, port, path.to_string()))
}

/// GETs `url`; `Up` on 2xx. Never longer than `timeout`.
pub async fn probe(url: &str, timeout: Duration) -> ProbeOutcome {
    let (host, port, path) = match parse_http_url(url) {
        Ok(parts) => parts,
        Err(reason) => return ProbeOutcome::Unsupported(reason),
    };
    match tokio::time::timeout(timeout, get_status(&host, port, &path)).await {
        Ok(Ok(status)) if (200..300).contains(&status) => ProbeOutcome::Up(status),
        Ok(Ok(status)) => ProbeOutcome::Down(format!("HTTP {status}")),
        Ok(Err(e)) => ProbeOutcome::Down(e.to_string()),
        Err(_) => ProbeOutcome::Down(format!("no answer within {} ms", timeout.as_millis())),
    }
}

async fn get_status(host: &str, port: u16, path: &str) -> std::io::Result<u16> {
    let connect_host = host.to_string();
    let mut stream = TcpStream::connect((connect_host.as_str(), port)).await?;
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

    #[test]
    fn urls() {
        assert_eq!(
            parse_http_url("http://127.0.0.1:8080/health").unwrap(),
            ("127.0.0.1".into(), 8080, "/health".into())
        );
        assert_eq!(
            parse_http_url("http://localhost").unwrap(),
            ("localhost".into(), 80, "/".into())
        );
        assert_eq!(
            parse_http_url("http://[::1]:9/x?y").unwrap(),
            ("::1".into(), 9, "/x?y".into())
        );
        assert!(parse_http_url("https://a/health").is_err());
        assert!(parse_http_url("http://a:notaport/").is_err());
    }
}
