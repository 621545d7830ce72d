//! Which comment states a job may resume from: those signed with this repository's key.
//!
//! The state block lives in a comment on someone else's issue (the upstream report), and
//! anyone who may write to that repository can edit the comment. A resumed job writes the
//! block's runs into its store as if it had probed them, so an edited block would decide the
//! answer. The report job, the only job that holds the private key, signs every block it
//! posts; a job that resumes checks the signature with the public key, which is no secret. A
//! block that does not verify is shown, never used.
//!
//! The signature covers the comment's key and the block's text exactly as posted, so nothing
//! is re-serialized to check it, and a block copied into another comment does not verify there.
//! Ed25519 (ring, already linked for TLS) signs the same text the same way every time, so an
//! unchanged report is still an unchanged comment.

use base64::Engine;
use ring::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};
use sha2::{Digest, Sha256};

/// Environment variable of the private key (base64 of its PKCS#8 DER), for the report job.
pub const SIGNING_KEY_ENV: &str = "SETROWS_STATE_SIGNING_KEY";
/// Environment variable of the public key (base64 of its DER or of the 32 raw bytes).
pub const PUBLIC_KEY_ENV: &str = "SETROWS_STATE_PUBLIC_KEY";

const LINE_PREFIX: &str = "<!-- setrows-bisect-signature:v1 ed25519 ";
const LINE_END: &str = " -->";
/// What `openssl pkey -pubout -outform DER` puts before the 32 key bytes of an Ed25519 key.
const SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// The private key; its `Debug` shows the public key's id only.
pub struct Signer {
    pair: Ed25519KeyPair,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Signer({})", self.verifier().id())
    }
}

/// The public key a job resumes with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verifier {
    key: [u8; 32],
}

/// What a state block is worth to a job that would resume from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// Signed with our key, unchanged since.
    Signed,
    /// No public key is configured, so no block can be trusted.
    NoKey,
    Unsigned,
    /// Signed with another key (its id).
    OtherKey(String),
    /// Our key's signature, but the block or the key changed after signing.
    Altered,
}

impl Trust {
    /// Why a block that is not [`Trust::Signed`] is not used, for the one line that says so.
    pub fn reason(&self) -> String {
        match self {
            Trust::Signed => "signed with this repository's key".into(),
            Trust::NoKey => format!(
                "{PUBLIC_KEY_ENV} is not set, so no state can be checked (docs/github.md: Signed state)"
            ),
            Trust::Unsigned => "its state is not signed".into(),
            Trust::OtherKey(id) => format!("its state is signed with another key ({id})"),
            Trust::Altered => "its state was changed after it was signed".into(),
        }
    }
}

fn decode(what: &str, text: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|_| format!("{what} is not base64"))
}

impl Signer {
    /// From base64 PKCS#8 DER, as `openssl genpkey -algorithm ed25519 -outform DER | base64 -w0`
    /// writes it.
    pub fn from_base64(text: &str) -> Result<Signer, String> {
        let der = decode(SIGNING_KEY_ENV, text)?;
        let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der)
            .map_err(|_| format!("{SIGNING_KEY_ENV} is not an Ed25519 private key (PKCS#8 DER)"))?;
        Ok(Signer { pair })
    }

    pub fn verifier(&self) -> Verifier {
        let mut key = [0u8; 32];
        key.copy_from_slice(self.pair.public_key().as_ref());
        Verifier { key }
    }

    /// The signature line for the state block text `json` of the comment `key`.
    pub fn line(&self, key: &str, json: &str) -> String {
        let sig = self.pair.sign(&message(key, json));
        format!(
            "{LINE_PREFIX}{} {}{LINE_END}",
            self.verifier().id(),
            base64::engine::general_purpose::STANDARD.encode(sig.as_ref())
        )
    }
}

impl Verifier {
    /// From base64 of the DER public key (`openssl pkey -pubout -outform DER`) or of its 32
    /// raw bytes.
    pub fn from_base64(text: &str) -> Result<Verifier, String> {
        let bytes = decode(PUBLIC_KEY_ENV, text)?;
        let raw = match bytes.strip_prefix(&SPKI_PREFIX[..]) {
            Some(rest) => rest,
            None => &bytes[..],
        };
        let key: [u8; 32] = raw
            .try_into()
            .map_err(|_| format!("{PUBLIC_KEY_ENV} is not an Ed25519 public key"))?;
        Ok(Verifier { key })
    }

    /// Names the key in the signature line, so a block signed with another key says so.
    pub fn id(&self) -> String {
        hex::encode(&Sha256::digest(self.key)[..8])
    }

    /// What the block text `json` of comment `key` with signature line `line` is worth.
    pub fn check(&self, key: &str, json: &str, line: Option<&str>) -> Trust {
        let Some(rest) = line
            .and_then(|l| l.trim().strip_prefix(LINE_PREFIX))
            .and_then(|l| l.strip_suffix(LINE_END))
        else {
            return Trust::Unsigned;
        };
        let (id, sig) = rest.split_once(' ').unwrap_or((rest, ""));
        if id != self.id() {
            return Trust::OtherKey(id.chars().take(16).collect());
        }
        let Ok(sig) = base64::engine::general_purpose::STANDARD.decode(sig) else {
            return Trust::Altered;
        };
        match UnparsedPublicKey::new(&ED25519, self.key).verify(&message(key, json), &sig) {
            Ok(()) => Trust::Signed,
            Err(_) => Trust::Altered,
        }
    }
}

/// Whether a body line is a signature line (where [`Verifier::check`] looks).
pub fn is_line(line: &str) -> bool {
    line.trim().starts_with("<!-- setrows-bisect-signature:")
}

fn message(key: &str, json: &str) -> Vec<u8> {
    format!("setrows-bisect-state:v1\n{key}\n{json}").into_bytes()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fixed test key pair made with openssl, as docs/github.md says:
    /// `openssl genpkey -algorithm ed25519 -outform DER | base64 -w0` and
    /// `openssl pkey -inform DER -pubout -outform DER | base64 -w0`.
    pub const PRIVATE: &str = "MC4CAQAwBQYDK2VwBCIEIBy5TTOqjNjKZ/Mm+716NtH8iZRdNjvdO5gOANTVv8Tk";
    pub const PUBLIC: &str = "MCowBQYDK2VwAyEAk56sH05IynITFehTvaBfvyetIMRRbyIelr1WUeCF2U4=";

    #[test]
    fn openssl_keys_sign_and_check() {
        let s = Signer::from_base64(PRIVATE).unwrap();
        let v = Verifier::from_base64(PUBLIC).unwrap();
        assert_eq!(s.verifier(), v);
        let line = s.line("bisect:1a2b", r#"{"key":"bisect:1a2b"}"#);
        assert!(is_line(&line));
        assert_eq!(line, s.line("bisect:1a2b", r#"{"key":"bisect:1a2b"}"#));
        assert_eq!(
            v.check("bisect:1a2b", r#"{"key":"bisect:1a2b"}"#, Some(&line)),
            Trust::Signed
        );
        // The text changed, or the block was copied under another key.
        assert_eq!(
            v.check("bisect:1a2b", r#"{"key":"bisect:1a2c"}"#, Some(&line)),
            Trust::Altered
        );
        assert_eq!(
            v.check("bisect:ffff", r#"{"key":"bisect:1a2b"}"#, Some(&line)),
            Trust::Altered
        );
        assert_eq!(v.check("bisect:1a2b", "{}", None), Trust::Unsigned);
    }

    #[test]
    fn another_key_is_named_and_raw_public_keys_are_read() {
        let rng = ring::rand::SystemRandom::new();
        let other = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let other =
            Signer::from_base64(&base64::engine::general_purpose::STANDARD.encode(other.as_ref()))
                .unwrap();
        let line = other.line("matrix", "{}");
        let ours = Verifier::from_base64(PUBLIC).unwrap();
        assert_eq!(
            ours.check("matrix", "{}", Some(&line)),
            Trust::OtherKey(other.verifier().id())
        );
        let raw = base64::engine::general_purpose::STANDARD.encode(other.verifier().key);
        assert_eq!(Verifier::from_base64(&raw).unwrap(), other.verifier());
    }

    #[test]
    fn bad_keys_are_one_line_errors_that_show_no_key() {
        for bad in ["not base64!", "AAAA", PUBLIC] {
            let e = Signer::from_base64(bad).unwrap_err();
            assert!(e.starts_with(SIGNING_KEY_ENV) && !e.contains('\n'), "{e}");
        }
        let e = Verifier::from_base64(PRIVATE).unwrap_err();
        assert!(e.starts_with(PUBLIC_KEY_ENV), "{e}");
        let s = Signer::from_base64(PRIVATE).unwrap();
        assert!(!format!("{s:?}").contains(PRIVATE));
    }
}
