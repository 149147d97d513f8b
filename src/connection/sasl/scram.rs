//! The client side of SCRAM (Salted Challenge Response Authentication
//! Mechanism) with SHA-256 or SHA-512, sans-io: messages in, messages out.
//!
//! The exchange is four messages. The client sends *client-first*
//! (`n,,n=USER,r=CLIENT_NONCE`); the server answers *server-first*
//! (`r=CLIENT_NONCE+SERVER_NONCE,s=SALT,i=ITERATIONS`); the client proves it
//! knows the password with *client-final* (`c=biws,r=NONCE,p=PROOF`); the
//! server proves it knows the password's verifier with *server-final*
//! (`v=SERVER_SIGNATURE`, or `e=ERROR`). [`ScramClient`] walks these steps;
//! it never touches a socket, so it is tested against the RFC's vector.
//!
//! Channel binding is not used (`n,,`: the client does not support it), as
//! Kafka does not support it either. Usernames are escaped (`,` as `=2C`,
//! `=` as `=3D`). SASLprep (RFC 4013) is not applied, as Kafka itself does
//! not apply it: its `ScramFormatter` salts a password's UTF-8 bytes as they
//! are, on the broker when credentials are stored and in its Java client,
//! so a non-ASCII password matches what Kafka stored only when used as is.
//!
//! # References
//! - RFC 5802 (SCRAM), §3 (algorithm), §5 (messages), §7 (syntax).
//! - RFC 7677 (SCRAM-SHA-256), §3 (the test vector in this file's tests).
//! - KIP-84 (SCRAM in Kafka: SCRAM-SHA-256 and SCRAM-SHA-512, minimum 4096
//!   iterations).

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// The most PBKDF2 iterations a server may ask for: more would let a
/// hostile server make the client spin (Kafka allows at most 16384).
pub const MAX_ITERATIONS: u32 = 1 << 20;

/// The fewest PBKDF2 iterations a server may ask for: Kafka's minimum
/// (KIP-84; its Java client refuses fewer too) and the least RFC 7677 §4
/// says a server should announce. Fewer would let a server, or whoever
/// stands between, make the client's proof cheap to attack offline.
pub const MIN_ITERATIONS: u32 = 4096;

/// The hash function of a SCRAM mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScramHash {
    /// SCRAM-SHA-256 (RFC 7677).
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl ScramHash {
    /// The SASL mechanism name.
    pub fn mechanism(self) -> &'static str {
        match self {
            Self::Sha256 => "SCRAM-SHA-256",
            Self::Sha512 => "SCRAM-SHA-512",
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
            // HMAC takes keys of any length: `new_from_slice` cannot fail.
            match <M as hmac::digest::KeyInit>::new_from_slice(key) {
                Ok(mut mac) => {
                    mac.update(data);
                    mac.finalize().into_bytes().to_vec()
                }
                Err(_) => Vec::new(),
            }
        }
        match self {
            Self::Sha256 => run::<Hmac<Sha256>>(key, data),
            Self::Sha512 => run::<Hmac<Sha512>>(key, data),
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Self::Sha256 => Sha256::digest(data).to_vec(),
            Self::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Self::Sha256 => {
                let mut out = [0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out.to_vec()
            }
            Self::Sha512 => {
                let mut out = [0u8; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out.to_vec()
            }
        }
    }
}

/// What went wrong in a SCRAM exchange.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScramError {
    /// A server message does not follow the SCRAM syntax.
    #[error("malformed SCRAM {message} message: {why}")]
    Malformed {
        /// Which message (`server-first`, `server-final`).
        message: &'static str,
        /// What was wrong.
        why: String,
    },
    /// The server's nonce does not extend the client's: not an answer to
    /// this exchange.
    #[error("the server's SCRAM nonce does not start with the client's")]
    NonceMismatch,
    /// The server asked for more PBKDF2 iterations than [`MAX_ITERATIONS`].
    #[error("the server asked for {0} SCRAM iterations, more than the {MAX_ITERATIONS} allowed")]
    TooManyIterations(u32),
    /// The server asked for fewer PBKDF2 iterations than [`MIN_ITERATIONS`].
    #[error(
        "the server asked for {0} SCRAM iterations, fewer than the {MIN_ITERATIONS} Kafka requires"
    )]
    TooFewIterations(u32),
    /// The server refused the proof (`e=...` in server-final).
    #[error("the server refused the SCRAM proof: {0}")]
    Refused(String),
    /// The server's signature is wrong: it does not know the password's
    /// verifier, so it is not the server the credentials were made for.
    #[error("the server's SCRAM signature does not verify: the server does not know this user's credentials")]
    BadServerSignature,
    /// A message arrived in a state that does not expect it.
    #[error("SCRAM message out of order (expected {expected})")]
    OutOfOrder {
        /// What was expected.
        expected: &'static str,
    },
}

#[derive(Debug, Clone)]
enum Step {
    /// client-first was made; server-first is awaited.
    First,
    /// client-final was made; server-final is awaited.
    Final {
        server_signature: Vec<u8>,
    },
    Done,
}

/// One SCRAM exchange, client side.
#[derive(Debug, Clone)]
pub struct ScramClient {
    hash: ScramHash,
    password: String,
    client_nonce: String,
    client_first_bare: String,
    step: Step,
}

/// `,` and `=` in a username, escaped as RFC 5802 §5.1 says.
pub fn escape_username(username: &str) -> String {
    username.replace('=', "=3D").replace(',', "=2C")
}

/// A fresh client nonce: 24 random bytes, base64 (printable, no `,`).
fn fresh_nonce() -> String {
    let bytes: [u8; 24] = rand::random();
    BASE64.encode(bytes)
}

/// The attributes `k=v` of a message, in order.
fn attributes<'a>(
    message: &'static str,
    text: &'a str,
) -> Result<Vec<(char, &'a str)>, ScramError> {
    text.split(',')
        .map(|part| {
            let mut chars = part.chars();
            match (chars.next(), chars.next()) {
                (Some(k), Some('=')) if k.is_ascii_alphabetic() => Ok((k, &part[2..])),
                _ => Err(ScramError::Malformed {
                    message,
                    why: format!("{part:?} is not an attribute (k=value)"),
                }),
            }
        })
        .collect()
}

impl ScramClient {
    /// Starts an exchange for `username` and `password` with a random nonce.
    pub fn new(hash: ScramHash, username: &str, password: &str) -> Self {
        Self::with_nonce(hash, username, password, &fresh_nonce())
    }

    /// Starts an exchange with a given client nonce (for tests against
    /// known vectors).
    pub fn with_nonce(hash: ScramHash, username: &str, password: &str, nonce: &str) -> Self {
        Self {
            hash,
            password: password.to_owned(),
            client_nonce: nonce.to_owned(),
            client_first_bare: format!("n={},r={nonce}", escape_username(username)),
            step: Step::First,
        }
    }

    /// The client-first message: no channel binding, no authzid.
    pub fn client_first(&self) -> String {
        format!("n,,{}", self.client_first_bare)
    }

    /// Reads server-first and returns client-final, with the proof.
    pub fn client_final(&mut self, server_first: &[u8]) -> Result<String, ScramError> {
        const MSG: &str = "server-first";
        if !matches!(self.step, Step::First) {
            return Err(ScramError::OutOfOrder {
                expected: "server-final",
            });
        }
        let malformed = |why: String| ScramError::Malformed { message: MSG, why };
        let text =
            std::str::from_utf8(server_first).map_err(|_| malformed("not UTF-8".to_owned()))?;
        let attrs = attributes(MSG, text)?;
        if let Some((_, e)) = attrs.iter().find(|(k, _)| *k == 'e') {
            return Err(ScramError::Refused((*e).to_owned()));
        }
        let (nonce, salt, iterations) = match attrs.as_slice() {
            [('r', r), ('s', s), ('i', i), ..] => (*r, *s, *i),
            [('m', _), ..] => {
                return Err(malformed(
                    "mandatory extension (m=) requested, which is not supported".to_owned(),
                ))
            }
            _ => return Err(malformed(format!("expected r=,s=,i= in {text:?}"))),
        };
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err(ScramError::NonceMismatch);
        }
        let salt = BASE64
            .decode(salt)
            .map_err(|e| malformed(format!("salt is not base64: {e}")))?;
        let iterations: u32 = iterations
            .parse()
            .ok()
            .filter(|i| *i > 0)
            .ok_or_else(|| malformed(format!("iteration count {iterations:?}")))?;
        if iterations > MAX_ITERATIONS {
            return Err(ScramError::TooManyIterations(iterations));
        }
        if iterations < MIN_ITERATIONS {
            return Err(ScramError::TooFewIterations(iterations));
        }
        let h = self.hash;
        let salted = h.salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = h.hmac(&salted, b"Client Key");
        let stored_key = h.hash(&client_key);
        // "biws" is base64("n,,"): the GS2 header, no channel binding.
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let client_signature = h.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&client_signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = h.hmac(&salted, b"Server Key");
        let server_signature = h.hmac(&server_key, auth_message.as_bytes());
        self.step = Step::Final { server_signature };
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)))
    }

    /// Reads server-final and checks the server's signature.
    pub fn finish(&mut self, server_final: &[u8]) -> Result<(), ScramError> {
        const MSG: &str = "server-final";
        let Step::Final { server_signature } = &self.step else {
            return Err(ScramError::OutOfOrder {
                expected: if matches!(self.step, Step::First) {
                    "server-first"
                } else {
                    "nothing (the exchange is over)"
                },
            });
        };
        let malformed = |why: String| ScramError::Malformed { message: MSG, why };
        let text =
            std::str::from_utf8(server_final).map_err(|_| malformed("not UTF-8".to_owned()))?;
        let attrs = attributes(MSG, text)?;
        match attrs.first() {
            Some(('e', e)) => Err(ScramError::Refused((*e).to_owned())),
            Some(('v', v)) => {
                let signature = BASE64
                    .decode(v)
                    .map_err(|e| malformed(format!("signature is not base64: {e}")))?;
                if &signature != server_signature {
                    return Err(ScramError::BadServerSignature);
                }
                self.step = Step::Done;
                Ok(())
            }
            _ => Err(malformed(format!("expected v= or e= in {text:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
    const SERVER_FIRST: &str =
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";

    /// RFC 7677 §3: user "user", password "pencil".
    #[test]
    fn rfc7677_sha256_vector() {
        let mut client = ScramClient::with_nonce(ScramHash::Sha256, "user", "pencil", NONCE);
        assert_eq!(client.client_first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let last = client.client_final(SERVER_FIRST.as_bytes()).expect("final");
        assert_eq!(
            last,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        client
            .finish(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .expect("server signature verifies");
        // Nothing more is expected.
        assert!(matches!(
            client.finish(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
            Err(ScramError::OutOfOrder { .. })
        ));
    }

    #[test]
    fn a_wrong_server_signature_is_refused() {
        let mut client = ScramClient::with_nonce(ScramHash::Sha256, "user", "pencil", NONCE);
        client.client_final(SERVER_FIRST.as_bytes()).expect("final");
        let err = client
            .finish(b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
            .expect_err("forged");
        assert_eq!(err, ScramError::BadServerSignature);
    }

    #[test]
    fn server_errors_and_bad_messages_are_named() {
        let mut client = ScramClient::with_nonce(ScramHash::Sha512, "user", "pencil", NONCE);
        assert!(matches!(
            client.finish(b"v=x"),
            Err(ScramError::OutOfOrder {
                expected: "server-first"
            })
        ));
        assert_eq!(
            client
                .clone()
                .client_final(b"r=someoneelse,s=AAAA,i=4096")
                .expect_err("nonce"),
            ScramError::NonceMismatch
        );
        // The client's nonce alone, with nothing of the server's.
        assert_eq!(
            client
                .clone()
                .client_final(format!("r={NONCE},s=AAAA,i=4096").as_bytes())
                .expect_err("nonce"),
            ScramError::NonceMismatch
        );
        assert_eq!(
            client
                .clone()
                .client_final(format!("r={NONCE}x,s=AAAA,i=99999999").as_bytes())
                .expect_err("iterations"),
            ScramError::TooManyIterations(99_999_999)
        );
        // Below Kafka's minimum: refused before any proof is computed.
        assert_eq!(
            client
                .clone()
                .client_final(format!("r={NONCE}x,s=AAAA,i=4095").as_bytes())
                .expect_err("iterations"),
            ScramError::TooFewIterations(4095)
        );
        client
            .clone()
            .client_final(format!("r={NONCE}x,s=AAAA,i={MIN_ITERATIONS}").as_bytes())
            .expect("the minimum is taken");
        for bad in [
            &b"garbage"[..],
            b"r=x",
            b"\xff\xfe",
            b"m=ext,r=x,s=AAAA,i=1",
            b"r=rOprNGfwEbeRWgbNEkqOx,s=!!,i=1",
            b"r=rOprNGfwEbeRWgbNEkqOx,s=AAAA,i=0",
        ] {
            let err = client.clone().client_final(bad).expect_err("malformed");
            assert!(
                matches!(
                    err,
                    ScramError::Malformed {
                        message: "server-first",
                        ..
                    }
                ),
                "{bad:?}: {err}"
            );
        }
        assert_eq!(
            client
                .clone()
                .client_final(b"e=unknown-user")
                .expect_err("refused"),
            ScramError::Refused("unknown-user".to_owned())
        );
        client
            .client_final(format!("r={NONCE}srv,s=AAAA,i=4096").as_bytes())
            .expect("final");
        assert_eq!(
            client.finish(b"e=invalid-proof").expect_err("refused"),
            ScramError::Refused("invalid-proof".to_owned())
        );
    }

    #[test]
    fn usernames_are_escaped() {
        assert_eq!(escape_username("a,b=c"), "a=2Cb=3Dc");
        let client = ScramClient::with_nonce(ScramHash::Sha256, "a,b", "p", "n");
        assert_eq!(client.client_first(), "n,,n=a=2Cb,r=n");
        let random = ScramClient::new(ScramHash::Sha256, "u", "p").client_first();
        assert!(
            random.starts_with("n,,n=u,r=") && random.len() > 20,
            "{random}"
        );
    }
}
