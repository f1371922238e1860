//! One WebSocket connection of the probe: NIP-01 text in, each relay message read as plain
//! JSON (a relay under test may send what relaysim's own model has no type for: `COUNT`, an
//! `OK` with an empty id, a malformed frame).

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::ProbeError;

/// What a relay sent, as the probe sorts it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Heard {
    /// `["OK", id, accepted, message]`.
    Ok {
        id: String,
        accepted: bool,
        message: String,
    },
    /// `["EVENT", sub, event]`: the event's id.
    Event { sub: String, id: String },
    /// `["EOSE", sub]`.
    Eose(String),
    /// `["CLOSED", sub, message]`.
    Closed { sub: String, message: String },
    /// `["NOTICE", message]`.
    Notice(String),
    /// `["AUTH", challenge]`.
    Auth,
    /// A WebSocket ping (tungstenite answers it).
    Ping,
    /// Anything else, as it came.
    Other(String),
    /// The relay closed the connection (or it broke).
    Gone,
}

/// A connection to the relay under test.
pub(super) struct Conn {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    gone: bool,
    /// Whether [`Conn::next`] hands pings over (the keepalive probe) or skips them.
    report_pings: bool,
}

impl Conn {
    /// Opens a connection, giving up at `deadline`.
    pub(super) async fn open(url: &str, deadline: Instant) -> Result<Conn, ProbeError> {
        let connect = tokio_tungstenite::connect_async(url);
        match timeout_at(deadline, connect).await {
            Ok(Ok((ws, _))) => Ok(Conn {
                ws,
                gone: false,
                report_pings: false,
            }),
            Ok(Err(e)) => Err(ProbeError::Connect {
                url: url.to_owned(),
                reason: e.to_string(),
            }),
            Err(_) => Err(ProbeError::Connect {
                url: url.to_owned(),
                reason: "no WebSocket handshake in time".into(),
            }),
        }
    }

    /// Hands the relay's pings over as [`Heard::Ping`] from now on.
    pub(super) fn reporting_pings(mut self) -> Self {
        self.report_pings = true;
        self
    }

    /// Sends one text frame; a connection the relay closed takes nothing more.
    pub(super) async fn send(&mut self, text: String) {
        if !self.gone && self.ws.send(Message::text(text)).await.is_err() {
            self.gone = true;
        }
    }

    /// The next relay message before `deadline` (`None`: nothing came in time).
    pub(super) async fn next(&mut self, deadline: Instant) -> Option<Heard> {
        if self.gone {
            return Some(Heard::Gone);
        }
        loop {
            let frame = match timeout_at(deadline, self.ws.next()).await {
                Err(_) => return None,
                Ok(frame) => frame,
            };
            let text = match frame {
                Some(Ok(Message::Text(t))) => t.to_string(),
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => {
                    self.gone = true;
                    return Some(Heard::Gone);
                }
                Some(Ok(Message::Ping(_))) if self.report_pings => return Some(Heard::Ping),
                Some(Ok(_)) => continue, // pings are answered by tungstenite
            };
            return Some(heard(&text));
        }
    }

    /// Messages until one that `done` accepts, nothing comes for `quiet`, or `deadline`.
    pub(super) async fn until(
        &mut self,
        deadline: Instant,
        quiet: Duration,
        mut done: impl FnMut(&Heard) -> bool,
    ) -> Vec<Heard> {
        let mut all = Vec::new();
        loop {
            let by = deadline.min(Instant::now() + quiet);
            match self.next(by).await {
                None => return all,
                Some(h) => {
                    let stop = done(&h) || h == Heard::Gone;
                    all.push(h);
                    if stop {
                        return all;
                    }
                }
            }
        }
    }

    /// Closes the connection politely.
    pub(super) async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}

fn heard(text: &str) -> Heard {
    let other = || Heard::Other(text.chars().take(200).collect());
    let Ok(Value::Array(parts)) = serde_json::from_str::<Value>(text) else {
        return other();
    };
    let s = |i: usize| parts.get(i).and_then(Value::as_str).map(str::to_owned);
    match (s(0).as_deref(), parts.len()) {
        (Some("OK"), 4) => match (s(1), parts[2].as_bool(), s(3)) {
            (Some(id), Some(accepted), Some(message)) => Heard::Ok {
                id,
                accepted,
                message,
            },
            _ => other(),
        },
        (Some("EVENT"), 3) => match (s(1), parts[2].get("id").and_then(Value::as_str)) {
            (Some(sub), Some(id)) => Heard::Event {
                sub,
                id: id.to_owned(),
            },
            _ => other(),
        },
        (Some("EOSE"), 2) => s(1).map_or_else(other, Heard::Eose),
        (Some("CLOSED"), 3) => match (s(1), s(2)) {
            (Some(sub), Some(message)) => Heard::Closed { sub, message },
            _ => other(),
        },
        (Some("NOTICE"), 2) => s(1).map_or_else(other, Heard::Notice),
        (Some("AUTH"), _) => Heard::Auth,
        _ => other(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_messages_are_sorted_and_anything_else_kept() {
        assert_eq!(
            heard(r#"["OK","ab",false,"invalid: too large"]"#),
            Heard::Ok {
                id: "ab".into(),
                accepted: false,
                message: "invalid: too large".into()
            }
        );
        assert_eq!(
            heard(r#"["EVENT","s",{"id":"cd","kind":1}]"#),
            Heard::Event {
                sub: "s".into(),
                id: "cd".into()
            }
        );
        assert_eq!(heard(r#"["AUTH","challenge"]"#), Heard::Auth);
        assert_eq!(heard(r#"["EOSE","s"]"#), Heard::Eose("s".into()));
        assert!(matches!(heard("not json"), Heard::Other(_)));
    }
}
