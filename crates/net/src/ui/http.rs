//! The little HTTP/1.1 `herdsim ui` speaks: one request per connection
//! (every response says `Connection: close`), its head bounded in bytes
//! and time, a body only by `Content-Length` and bounded too (no chunked
//! uploads), and the Host and Origin checks every request passes first.

use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// How much a request may be and take.
#[derive(Debug, Clone, Copy)]
pub struct HttpBounds {
    /// The request line and headers, bytes.
    pub max_head: usize,
    /// The body, bytes.
    pub max_body: usize,
    /// From the connection to the whole request read.
    pub read_timeout: Duration,
    /// One response written.
    pub write_timeout: Duration,
}

impl Default for HttpBounds {
    fn default() -> Self {
        HttpBounds {
            max_head: 16 << 10,
            max_body: 64 << 10,
            read_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
        }
    }
}

/// A request as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// Header names lowercased, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// A header given more than once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeated;

impl Request {
    /// The one value of header `name` (lowercase): `Err` when it is given
    /// more than once.
    pub fn header(&self, name: &str) -> Result<Option<&str>, Repeated> {
        let mut values = self.headers.iter().filter(|(n, _)| n == name);
        let first = values.next().map(|(_, v)| v.as_str());
        match values.next() {
            Some(_) => Err(Repeated),
            None => Ok(first),
        }
    }
}

/// A refused request: the status and the message sent back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub message: String,
}

fn refuse(status: u16, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        message: message.into(),
    }
}

/// Read one request from `io` within the bounds (the time bound is the
/// caller's: [`read_request_within`]).
pub async fn read_request<R: AsyncRead + Unpin>(
    io: &mut R,
    b: &HttpBounds,
) -> Result<Request, Refusal> {
    let mut buf: Vec<u8> = Vec::with_capacity(2048);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = find_head_end(&buf) {
            break i;
        }
        if buf.len() > b.max_head {
            return Err(refuse(
                431,
                format!(
                    "request headers larger than {} KiB (herdsim ui's bound)",
                    b.max_head >> 10
                ),
            ));
        }
        let n = io
            .read(&mut chunk)
            .await
            .map_err(|e| refuse(400, format!("cannot read the request: {e}")))?;
        if n == 0 {
            return Err(refuse(400, "the connection closed before a whole request"));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    if head_end > b.max_head {
        return Err(refuse(
            431,
            format!(
                "request headers larger than {} KiB (herdsim ui's bound)",
                b.max_head >> 10
            ),
        ));
    }
    let mut req = parse_head(&buf[..head_end])?;
    if req
        .header("transfer-encoding")
        .map_err(|_| dup("Transfer-Encoding"))?
        .is_some()
    {
        return Err(refuse(
            411,
            "a request body must come with Content-Length (no Transfer-Encoding)",
        ));
    }
    let length = match req
        .header("content-length")
        .map_err(|_| dup("Content-Length"))?
    {
        None => 0,
        Some(v) => v
            .trim()
            .parse::<usize>()
            .map_err(|_| refuse(400, format!("Content-Length `{v}` is not a whole number")))?,
    };
    if length > b.max_body {
        return Err(refuse(
            413,
            format!(
                "request body of {length} bytes is larger than the {} KiB herdsim ui reads",
                b.max_body >> 10
            ),
        ));
    }
    let mut body = buf.split_off(head_end + 4);
    if body.len() > length {
        body.truncate(length);
    }
    while body.len() < length {
        let n = io
            .read(&mut chunk)
            .await
            .map_err(|e| refuse(400, format!("cannot read the request body: {e}")))?;
        if n == 0 {
            return Err(refuse(400, "the connection closed inside the request body"));
        }
        let want = length - body.len();
        body.extend_from_slice(&chunk[..n.min(want)]);
    }
    req.body = body;
    Ok(req)
}

/// [`read_request`] within `b.read_timeout`.
pub async fn read_request_within<R: AsyncRead + Unpin>(
    io: &mut R,
    b: &HttpBounds,
) -> Result<Request, Refusal> {
    match tokio::time::timeout(b.read_timeout, read_request(io, b)).await {
        Ok(r) => r,
        Err(_) => Err(refuse(
            408,
            format!(
                "the request was not read within {} s (herdsim ui's bound)",
                b.read_timeout.as_secs()
            ),
        )),
    }
}

fn dup(name: &str) -> Refusal {
    refuse(400, format!("{name} given more than once"))
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n")
}

/// The request line and headers (`head` without the blank line).
pub fn parse_head(head: &[u8]) -> Result<Request, Refusal> {
    let text = std::str::from_utf8(head).map_err(|_| refuse(400, "request head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(refuse(400, "malformed request line"));
    };
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(refuse(
            505,
            format!("{version}: herdsim ui speaks HTTP/1.1"),
        ));
    }
    if !target.starts_with('/') {
        return Err(refuse(400, "the request target must be a path"));
    }
    let path = target.split(['?', '#']).next().unwrap_or("/").to_string();
    let mut headers = Vec::new();
    for l in lines {
        let Some((name, value)) = l.split_once(':') else {
            return Err(refuse(400, "malformed header line"));
        };
        if name.is_empty() || name.bytes().any(|c| c <= b' ' || c >= 0x7f) {
            return Err(refuse(400, "malformed header name"));
        }
        headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
    }
    Ok(Request {
        method: method.to_string(),
        path,
        headers,
        body: Vec::new(),
    })
}

/// Whether the request comes from the page itself: its Host is one of
/// `hosts` (the listen address, `localhost:PORT`), and its Origin, if it
/// has one, is `http://` and one of them. `Err`: the 403 to send.
pub fn check_origin(req: &Request, hosts: &[String]) -> Result<(), Refusal> {
    let forbidden = |m: String| refuse(403, m);
    let host = match req.header("host") {
        Ok(Some(h)) => h.to_ascii_lowercase(),
        Ok(None) => return Err(forbidden("no Host header".into())),
        Err(Repeated) => return Err(forbidden("Host given more than once".into())),
    };
    if !hosts.contains(&host) {
        return Err(forbidden(format!(
            "Host `{host}` is not this server's address ({}): herdsim ui answers only its own \
             page on this machine",
            hosts.join(", ")
        )));
    }
    match req.header("origin") {
        Ok(None) => Ok(()),
        Ok(Some(o)) => {
            let o = o.to_ascii_lowercase();
            match o.strip_prefix("http://") {
                Some(h) if hosts.iter().any(|x| x == h) => Ok(()),
                _ => Err(forbidden(format!(
                    "cross-origin request from `{o}` refused: herdsim ui answers only its own page"
                ))),
            }
        }
        Err(Repeated) => Err(forbidden("Origin given more than once".into())),
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Content",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Status",
    }
}

/// The page's Content-Security-Policy: its own inline script and style,
/// figures as blob: images, requests to itself only.
const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                   img-src blob: data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

/// The bytes of a response (`Connection: close`).
pub fn response(status: u16, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\
         Referrer-Policy: no-referrer\r\nContent-Security-Policy: {CSP}\r\n\
         Connection: close\r\n\r\n",
        reason(status),
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// A JSON error body: `{"ok": false, "error": message}`.
pub fn error_json(status: u16, message: &str) -> Vec<u8> {
    let body = serde_json::json!({ "ok": false, "status": status, "error": message });
    response(status, "application/json", body.to_string().as_bytes())
}

/// Write `bytes` within `b.write_timeout`, then shut the write side.
pub async fn send<W: AsyncWrite + Unpin>(io: &mut W, bytes: &[u8], b: &HttpBounds) {
    let write = async {
        io.write_all(bytes).await?;
        io.shutdown().await
    };
    // A peer that went away or does not read: nothing more to do.
    let _ = tokio::time::timeout(b.write_timeout, write).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(head: &str) -> Request {
        parse_head(head.as_bytes()).expect("parses")
    }

    #[test]
    fn head_parses_and_path_drops_the_query() {
        let r = req("GET /?a=1&b=2 HTTP/1.1\r\nHost: 127.0.0.1:80\r\nX-A:  b ");
        assert_eq!((r.method.as_str(), r.path.as_str()), ("GET", "/"));
        assert_eq!(r.header("x-a"), Ok(Some("b")));
        assert!(parse_head(b"GET / HTTP/2\r\n").is_err());
        assert!(parse_head(b"GET http://x/ HTTP/1.1\r\n").is_err());
        assert!(parse_head(b"GET / HTTP/1.1\r\nno colon").is_err());
        assert!(parse_head(b"GET  / HTTP/1.1").is_err());
    }

    #[test]
    fn host_and_origin_must_be_the_servers() {
        let hosts = vec!["127.0.0.1:8000".to_string(), "localhost:8000".to_string()];
        let ok = req("GET / HTTP/1.1\r\nHost: localhost:8000");
        assert!(check_origin(&ok, &hosts).is_ok());
        let same = req("POST / HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nOrigin: http://127.0.0.1:8000");
        assert!(check_origin(&same, &hosts).is_ok());
        for bad in [
            "GET / HTTP/1.1\r\nHost: evil.example:8000",
            "GET / HTTP/1.1\r\nHost: 127.0.0.1:8001",
            "GET / HTTP/1.1",
            "GET / HTTP/1.1\r\nHost: localhost:8000\r\nHost: localhost:8000",
            "GET / HTTP/1.1\r\nHost: localhost:8000\r\nOrigin: http://evil.example",
            "GET / HTTP/1.1\r\nHost: localhost:8000\r\nOrigin: null",
            "GET / HTTP/1.1\r\nHost: localhost:8000\r\nOrigin: https://localhost:8000",
        ] {
            let e = check_origin(&req(bad), &hosts).expect_err(bad);
            assert_eq!(e.status, 403, "{bad}");
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn bodies_are_bounded() {
        let b = HttpBounds {
            max_body: 10,
            ..HttpBounds::default()
        };
        let mut ok: &[u8] = b"POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcdef";
        let r = read_request(&mut ok, &b).await.expect("reads");
        assert_eq!(r.body, b"abc");
        let mut big: &[u8] = b"POST /x HTTP/1.1\r\nContent-Length: 11\r\n\r\n";
        assert_eq!(
            read_request(&mut big, &b).await.map_err(|e| e.status),
            Err(413)
        );
        let mut chunked: &[u8] = b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(
            read_request(&mut chunked, &b).await.map_err(|e| e.status),
            Err(411)
        );
        let long = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20 << 10));
        let mut long = long.as_bytes();
        assert_eq!(
            read_request(&mut long, &b).await.map_err(|e| e.status),
            Err(431)
        );
        let mut short: &[u8] = b"POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nab";
        assert_eq!(
            read_request(&mut short, &b).await.map_err(|e| e.status),
            Err(400)
        );
    }
}
