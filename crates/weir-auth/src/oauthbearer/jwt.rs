//! Checking an OAUTHBEARER token as a JWT, as Kafka's
//! `OAuthBearerValidatorCallbackHandler` (KIP-768) does with jose4j: signed
//! by a key of the identity provider's JWKS, unexpired at the time the
//! caller gives, for the expected audience and issuer, naming a principal.

use std::collections::BTreeSet;

use jsonwebtoken::crypto::CryptoProvider;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

use super::OAuthError;

/// Kafka's default `sasl.oauthbearer.clock.skew.seconds`.
const DEFAULT_CLOCK_SKEW_SECS: u64 = 30;

/// Kafka's default `sasl.oauthbearer.sub.claim.name`.
const DEFAULT_PRINCIPAL_CLAIM: &str = "sub";

/// Kafka's default `sasl.oauthbearer.scope.claim.name`.
const DEFAULT_SCOPE_CLAIM: &str = "scope";

/// Checks bearer tokens against a JWKS: the key named by the token's `kid`
/// must verify its signature (RS256/384/512, PS256/384/512, ES256, ES384 or
/// EdDSA, as the key's type allows; never `none` or a shared secret), and
/// its claims must pass Kafka's checks: `exp` and `iat` present, `exp` and
/// `nbf` within the clock skew of the time given, `aud` and `iss` as
/// expected, and the principal claim a non-blank string.
///
/// As with Kafka, a token that has an `aud` claim is refused when no
/// audience is expected: set the audiences the broker accepts.
#[derive(Clone)]
pub struct JwtValidator {
    keys: Vec<VerificationKey>,
    expected_audience: Vec<String>,
    expected_issuer: Option<String>,
    principal_claim: String,
    scope_claim: String,
    clock_skew_secs: u64,
}

impl std::fmt::Debug for JwtValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtValidator")
            .field("keys", &self.keys.len())
            .field("expected_audience", &self.expected_audience)
            .field("expected_issuer", &self.expected_issuer)
            .field("principal_claim", &self.principal_claim)
            .field("scope_claim", &self.scope_claim)
            .field("clock_skew_secs", &self.clock_skew_secs)
            .finish()
    }
}

#[derive(Clone)]
struct VerificationKey {
    kid: Option<String>,
    /// The algorithms this key may verify.
    algorithms: Vec<Algorithm>,
    key: DecodingKey,
}

/// What a valid token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedToken {
    /// The principal claim's value, trimmed.
    pub principal: String,
    /// The scopes of the scope claim; empty without one.
    pub scopes: BTreeSet<String>,
    /// `exp`, seconds since the Unix epoch: when a session authenticated by
    /// this token must re-authenticate.
    pub expires_at: u64,
    /// `iat`, seconds since the Unix epoch.
    pub issued_at: u64,
}

impl JwtValidator {
    /// A validator for the keys of a JWKS document (RFC 7517), as fetched
    /// from `sasl.oauthbearer.jwks.endpoint.url`. Keys for encryption,
    /// shared secrets and keys of unknown types are left out.
    ///
    /// `expected_audience` (Kafka's `sasl.oauthbearer.expected.audience`):
    /// a token must name one of them in `aud`; `None` or empty expects none.
    /// `expected_issuer` (`sasl.oauthbearer.expected.issuer`): `iss` must
    /// equal it. `principal_claim` (`sasl.oauthbearer.sub.claim.name`): the
    /// claim naming the principal, `sub` if `None`.
    pub fn from_jwks_json(
        jwks: &str,
        expected_audience: Option<Vec<String>>,
        expected_issuer: Option<String>,
        principal_claim: Option<String>,
    ) -> Result<Self, OAuthError> {
        if CryptoProvider::try_get_default().is_none() {
            return Err(OAuthError::InvalidJwks(
                "no signature provider: jsonwebtoken needs exactly one of its crypto features"
                    .into(),
            ));
        }
        let document: Value =
            serde_json::from_str(jwks).map_err(|e| OAuthError::InvalidJwks(e.to_string()))?;
        let entries = document
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| OAuthError::InvalidJwks("no \"keys\" array".into()))?;
        let keys: Vec<VerificationKey> = entries
            .iter()
            .filter_map(|entry| serde_json::from_value::<Jwk>(entry.clone()).ok())
            .filter_map(|jwk| VerificationKey::from_jwk(&jwk))
            .collect();
        if keys.is_empty() {
            return Err(OAuthError::InvalidJwks("no usable signature key".into()));
        }
        Ok(Self {
            keys,
            expected_audience: expected_audience.unwrap_or_default(),
            expected_issuer,
            principal_claim: principal_claim.unwrap_or_else(|| DEFAULT_PRINCIPAL_CLAIM.into()),
            scope_claim: DEFAULT_SCOPE_CLAIM.into(),
            clock_skew_secs: DEFAULT_CLOCK_SKEW_SECS,
        })
    }

    /// Sets how far, in seconds, `exp` and `nbf` may be off the time given
    /// (Kafka's `sasl.oauthbearer.clock.skew.seconds`, 30 by default).
    pub fn with_clock_skew(mut self, seconds: u64) -> Self {
        self.clock_skew_secs = seconds;
        self
    }

    /// Sets the claim holding the token's scopes (Kafka's
    /// `sasl.oauthbearer.scope.claim.name`, `scope` by default).
    pub fn with_scope_claim(mut self, claim: impl Into<String>) -> Self {
        self.scope_claim = claim.into();
        self
    }

    /// Checks `token` at `now_unix_secs` and returns its principal name.
    pub fn validate(&self, token: &str, now_unix_secs: u64) -> Result<String, OAuthError> {
        self.validate_token(token, now_unix_secs)
            .map(|valid| valid.principal)
    }

    /// Checks `token` at `now_unix_secs` and returns what it says.
    pub fn validate_token(
        &self,
        token: &str,
        now_unix_secs: u64,
    ) -> Result<ValidatedToken, OAuthError> {
        let claims = self.verified_claims(token)?;
        self.check_claims(&claims, now_unix_secs)
    }

    /// The token's claims, once its signature verifies with a key of the set.
    fn verified_claims(&self, token: &str) -> Result<Map<String, Value>, OAuthError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| OAuthError::InvalidToken(e.to_string()))?;
        // With a kid, only that key; without one, any key for the algorithm.
        let candidates: Vec<&VerificationKey> = self
            .keys
            .iter()
            .filter(|k| header.kid.is_none() || k.kid == header.kid)
            .filter(|k| k.algorithms.contains(&header.alg))
            .collect();
        if candidates.is_empty() {
            return Err(OAuthError::UnknownKey {
                kid: header.kid,
                algorithm: format!("{:?}", header.alg),
            });
        }
        let mut validation = Validation::new(header.alg);
        // Claims are checked below against the caller's clock, not the
        // library's.
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        let mut outcome = Err(OAuthError::InvalidSignature);
        for candidate in candidates {
            outcome = match jsonwebtoken::decode::<Value>(token, &candidate.key, &validation) {
                Ok(data) => match data.claims {
                    Value::Object(claims) => return Ok(claims),
                    _ => Err(OAuthError::InvalidToken(
                        "claims are not a JSON object".into(),
                    )),
                },
                Err(e) => match e.kind() {
                    ErrorKind::InvalidSignature => Err(OAuthError::InvalidSignature),
                    _ => Err(OAuthError::InvalidToken(e.to_string())),
                },
            };
        }
        outcome
    }

    fn check_claims(
        &self,
        claims: &Map<String, Value>,
        now: u64,
    ) -> Result<ValidatedToken, OAuthError> {
        let expires_at =
            numeric_date(claims, "exp")?.ok_or_else(|| OAuthError::MissingClaim("exp".into()))?;
        if now.saturating_sub(self.clock_skew_secs) >= expires_at {
            return Err(OAuthError::Expired {
                expired_at: expires_at,
                now,
            });
        }
        if let Some(not_before) = numeric_date(claims, "nbf")? {
            if now.saturating_add(self.clock_skew_secs) < not_before {
                return Err(OAuthError::NotYetValid { not_before, now });
            }
        }
        let issued_at =
            numeric_date(claims, "iat")?.ok_or_else(|| OAuthError::MissingClaim("iat".into()))?;
        self.check_audience(claims.get("aud"))?;
        if let Some(expected) = &self.expected_issuer {
            match claims.get("iss") {
                None => return Err(OAuthError::MissingClaim("iss".into())),
                Some(Value::String(issuer)) if issuer == expected => {}
                Some(_) => return Err(OAuthError::InvalidIssuer),
            }
        }
        let principal = match claims.get(&self.principal_claim) {
            None | Some(Value::Null) => {
                return Err(OAuthError::MissingClaim(self.principal_claim.clone()))
            }
            Some(Value::String(name)) if !name.trim().is_empty() => name.trim().to_owned(),
            Some(_) => return Err(OAuthError::InvalidClaim(self.principal_claim.clone())),
        };
        let scopes = self.scopes(claims.get(&self.scope_claim))?;
        Ok(ValidatedToken {
            principal,
            scopes,
            expires_at,
            issued_at,
        })
    }

    /// `aud` (a string or an array of strings) must name an expected
    /// audience; with none expected, it must be absent, as jose4j requires.
    fn check_audience(&self, audience: Option<&Value>) -> Result<(), OAuthError> {
        let named: Vec<&str> = match audience {
            None | Some(Value::Null) if self.expected_audience.is_empty() => return Ok(()),
            None | Some(Value::Null) => return Err(OAuthError::MissingClaim("aud".into())),
            Some(Value::String(one)) => vec![one],
            Some(Value::Array(many)) => many
                .iter()
                .map(|v| {
                    v.as_str()
                        .ok_or_else(|| OAuthError::InvalidClaim("aud".into()))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(OAuthError::InvalidClaim("aud".into())),
        };
        if named
            .iter()
            .any(|aud| self.expected_audience.iter().any(|e| e == aud))
        {
            Ok(())
        } else {
            Err(OAuthError::InvalidAudience)
        }
    }

    /// The scope claim as Kafka reads it: one string is one scope, an array
    /// of strings many; blank or repeated scopes are invalid; any other
    /// value counts as no scopes.
    fn scopes(&self, claim: Option<&Value>) -> Result<BTreeSet<String>, OAuthError> {
        let invalid = || OAuthError::InvalidClaim(self.scope_claim.clone());
        let raw: Vec<&Value> = match claim {
            Some(one @ Value::String(_)) => vec![one],
            Some(Value::Array(many)) => many.iter().collect(),
            _ => Vec::new(),
        };
        let mut scopes = BTreeSet::new();
        for scope in raw {
            let scope = scope.as_str().map(str::trim).ok_or_else(invalid)?;
            if scope.is_empty() || !scopes.insert(scope.to_owned()) {
                return Err(invalid());
            }
        }
        Ok(scopes)
    }
}

/// A NumericDate claim (RFC 7519 section 2): seconds since the epoch, a
/// fraction dropped; negative is invalid, as Kafka has it.
fn numeric_date(claims: &Map<String, Value>, name: &str) -> Result<Option<u64>, OAuthError> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match (n.as_u64(), n.as_f64()) {
            (Some(seconds), _) => Ok(Some(seconds)),
            (None, Some(seconds)) if seconds >= 0.0 && seconds.is_finite() => {
                // Saturates above u64::MAX, which no date reaches.
                Ok(Some(seconds as u64))
            }
            _ => Err(OAuthError::InvalidClaim(name.into())),
        },
        Some(_) => Err(OAuthError::InvalidClaim(name.into())),
    }
}

impl VerificationKey {
    /// The key and what it may verify, or `None` for a key not for
    /// signatures, a shared secret, or a type or curve not supported.
    fn from_jwk(jwk: &Jwk) -> Option<Self> {
        if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
            return None;
        }
        let mut algorithms: Vec<Algorithm> = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => vec![
                Algorithm::RS256,
                Algorithm::RS384,
                Algorithm::RS512,
                Algorithm::PS256,
                Algorithm::PS384,
                Algorithm::PS512,
            ],
            AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
                EllipticCurve::P256 => vec![Algorithm::ES256],
                EllipticCurve::P384 => vec![Algorithm::ES384],
                _ => return None,
            },
            AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
                vec![Algorithm::EdDSA]
            }
            // A shared secret in a published key set would let anyone sign.
            _ => return None,
        };
        if let Some(declared) = jwk.common.key_algorithm {
            let declared = Algorithm::try_from(declared).ok()?;
            algorithms.retain(|a| *a == declared);
        }
        if algorithms.is_empty() {
            return None;
        }
        Some(Self {
            kid: jwk.common.key_id.clone(),
            algorithms,
            key: DecodingKey::from_jwk(jwk).ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    use jsonwebtoken::{EncodingKey, Header};
    use proptest::prelude::*;
    use serde_json::json;

    use super::super::test_keys::{EC_PRIVATE, JWKS, RSA_OTHER_PRIVATE, RSA_PRIVATE};
    use super::*;

    const NOW: u64 = 1_800_000_000;

    fn der(pem: &str) -> Vec<u8> {
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        STANDARD.decode(body).unwrap()
    }

    /// A token for `claims`, signed with `key` under `alg`, naming `kid`.
    fn sign(alg: Algorithm, kid: Option<&str>, key: &EncodingKey, claims: &Value) -> String {
        let mut header = Header::new(alg);
        header.kid = kid.map(Into::into);
        jsonwebtoken::encode(&header, claims, key).unwrap()
    }

    fn rsa() -> EncodingKey {
        EncodingKey::from_rsa_der(&der(RSA_PRIVATE))
    }

    fn ec() -> EncodingKey {
        EncodingKey::from_ec_der(&der(EC_PRIVATE))
    }

    /// Claims that pass: `sub` alice, issued now, an hour to live, for the
    /// audience `kafka` from the issuer `https://idp`.
    fn claims() -> Value {
        json!({
            "sub": "alice",
            "iat": NOW,
            "exp": NOW + 3600,
            "aud": "kafka",
            "iss": "https://idp",
        })
    }

    fn with(changes: Value) -> Value {
        let mut claims = claims();
        for (k, v) in changes.as_object().unwrap() {
            if v.is_null() {
                claims.as_object_mut().unwrap().remove(k);
            } else {
                claims[k] = v.clone();
            }
        }
        claims
    }

    fn validator() -> JwtValidator {
        JwtValidator::from_jwks_json(
            JWKS,
            Some(vec!["kafka".into(), "kafka-admin".into()]),
            Some("https://idp".into()),
            None,
        )
        .unwrap()
    }

    fn es256(claims: &Value) -> String {
        sign(Algorithm::ES256, Some("ec-1"), &ec(), claims)
    }

    #[test]
    fn rs256_and_es256_tokens_name_their_principal() {
        let v = validator();
        let rs = sign(Algorithm::RS256, Some("rsa-1"), &rsa(), &claims());
        assert_eq!(v.validate(&rs, NOW), Ok("alice".into()));
        assert_eq!(v.validate(&es256(&claims()), NOW), Ok("alice".into()));
        let valid = v.validate_token(&es256(&claims()), NOW).unwrap();
        assert_eq!(
            valid,
            ValidatedToken {
                principal: "alice".into(),
                scopes: BTreeSet::new(),
                expires_at: NOW + 3600,
                issued_at: NOW,
            }
        );
    }

    #[test]
    fn without_kid_any_key_for_the_algorithm() {
        let v = validator();
        let token = sign(Algorithm::RS256, None, &rsa(), &claims());
        assert_eq!(v.validate(&token, NOW), Ok("alice".into()));
        let forged = sign(
            Algorithm::RS256,
            None,
            &EncodingKey::from_rsa_der(&der(RSA_OTHER_PRIVATE)),
            &claims(),
        );
        assert_eq!(v.validate(&forged, NOW), Err(OAuthError::InvalidSignature));
    }

    #[test]
    fn forged_and_tampered_tokens_fail() {
        let v = validator();
        let other = EncodingKey::from_rsa_der(&der(RSA_OTHER_PRIVATE));
        let forged = sign(Algorithm::RS256, Some("rsa-1"), &other, &claims());
        assert_eq!(v.validate(&forged, NOW), Err(OAuthError::InvalidSignature));

        // Another principal's claims under alice's signature.
        let token = es256(&claims());
        let mallory = es256(&with(json!({"sub": "mallory"})));
        let parts: Vec<&str> = token.split('.').collect();
        let mallory_parts: Vec<&str> = mallory.split('.').collect();
        let spliced = format!("{}.{}.{}", parts[0], mallory_parts[1], parts[2]);
        assert_eq!(v.validate(&spliced, NOW), Err(OAuthError::InvalidSignature));
    }

    #[test]
    fn keys_that_must_not_verify_are_not_found() {
        let v = validator();
        let unknown = |kid: Option<&str>, alg: &str| OAuthError::UnknownKey {
            kid: kid.map(Into::into),
            algorithm: alg.into(),
        };
        // A kid the set does not have.
        let token = sign(Algorithm::ES256, Some("ec-2"), &ec(), &claims());
        assert_eq!(v.validate(&token, NOW), Err(unknown(Some("ec-2"), "ES256")));
        // An algorithm the named key is not for: ES256 with the RSA key's
        // kid, PS256 where the JWKS declares RS256.
        let token = sign(Algorithm::ES256, Some("rsa-1"), &ec(), &claims());
        assert_eq!(
            v.validate(&token, NOW),
            Err(unknown(Some("rsa-1"), "ES256"))
        );
        let token = sign(Algorithm::PS256, Some("rsa-1"), &rsa(), &claims());
        assert_eq!(
            v.validate(&token, NOW),
            Err(unknown(Some("rsa-1"), "PS256"))
        );
        // An encryption key.
        let other = EncodingKey::from_rsa_der(&der(RSA_OTHER_PRIVATE));
        let token = sign(Algorithm::RS256, Some("rsa-enc"), &other, &claims());
        assert_eq!(
            v.validate(&token, NOW),
            Err(unknown(Some("rsa-enc"), "RS256"))
        );
        // The shared secret published in the set: anyone could sign so.
        let secret = EncodingKey::from_secret(b"secret-secret-secret-secret-secret").unwrap();
        for kid in [Some("hmac"), None] {
            let token = sign(Algorithm::HS256, kid, &secret, &claims());
            assert_eq!(v.validate(&token, NOW), Err(unknown(kid, "HS256")));
        }
    }

    #[test]
    fn unsigned_and_malformed_tokens_fail() {
        let v = validator();
        let none_header = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(br#"{"alg":"none","typ":"JWT"}"#);
        let body = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims().to_string());
        for token in [
            format!("{none_header}.{body}."),
            String::new(),
            "a.b".into(),
            "a.b.c".into(),
            "....".into(),
        ] {
            assert!(
                matches!(v.validate(&token, NOW), Err(OAuthError::InvalidToken(_))),
                "{token:?}"
            );
        }
    }

    #[test]
    fn expiry_against_the_given_time_with_skew() {
        let v = validator();
        let token = es256(&claims());
        let exp = NOW + 3600;
        assert_eq!(v.validate(&token, exp + 29), Ok("alice".into()));
        assert_eq!(
            v.validate(&token, exp + 30),
            Err(OAuthError::Expired {
                expired_at: exp,
                now: exp + 30
            })
        );
        let strict = validator().with_clock_skew(0);
        assert_eq!(strict.validate(&token, exp - 1), Ok("alice".into()));
        assert!(matches!(
            strict.validate(&token, exp),
            Err(OAuthError::Expired { .. })
        ));
    }

    #[test]
    fn not_before_against_the_given_time_with_skew() {
        let v = validator();
        let token = es256(&with(json!({"nbf": NOW + 100})));
        assert_eq!(v.validate(&token, NOW + 70), Ok("alice".into()));
        assert_eq!(
            v.validate(&token, NOW + 69),
            Err(OAuthError::NotYetValid {
                not_before: NOW + 100,
                now: NOW + 69
            })
        );
    }

    #[test]
    fn required_and_typed_claims() {
        let v = validator();
        let cases = [
            (json!({"exp": null}), OAuthError::MissingClaim("exp".into())),
            (json!({"iat": null}), OAuthError::MissingClaim("iat".into())),
            (json!({"sub": null}), OAuthError::MissingClaim("sub".into())),
            (
                json!({"exp": "soon"}),
                OAuthError::InvalidClaim("exp".into()),
            ),
            (json!({"exp": -5}), OAuthError::InvalidClaim("exp".into())),
            (json!({"iat": -1}), OAuthError::InvalidClaim("iat".into())),
            (
                json!({"nbf": "later"}),
                OAuthError::InvalidClaim("nbf".into()),
            ),
            (
                json!({"sub": "   "}),
                OAuthError::InvalidClaim("sub".into()),
            ),
            (json!({"sub": 42}), OAuthError::InvalidClaim("sub".into())),
        ];
        for (changes, error) in cases {
            let token = es256(&with(changes.clone()));
            assert_eq!(v.validate(&token, NOW), Err(error), "{changes}");
        }
        // A fractional date is read to the second; the name is trimmed.
        let token = es256(&with(
            json!({"exp": (NOW + 10) as f64 + 0.5, "sub": " alice "}),
        ));
        assert_eq!(v.validate(&token, NOW), Ok("alice".into()));
    }

    #[test]
    fn audience_and_issuer() {
        let v = validator();
        for aud in [json!("kafka"), json!(["other", "kafka-admin"])] {
            let token = es256(&with(json!({ "aud": aud })));
            assert_eq!(v.validate(&token, NOW), Ok("alice".into()), "{aud}");
        }
        let cases = [
            (json!({"aud": "other"}), OAuthError::InvalidAudience),
            (json!({"aud": ["a", "b"]}), OAuthError::InvalidAudience),
            (json!({"aud": []}), OAuthError::InvalidAudience),
            (json!({"aud": [1]}), OAuthError::InvalidClaim("aud".into())),
            (json!({"aud": null}), OAuthError::MissingClaim("aud".into())),
            (json!({"iss": "https://evil"}), OAuthError::InvalidIssuer),
            (json!({"iss": null}), OAuthError::MissingClaim("iss".into())),
        ];
        for (changes, error) in cases {
            let token = es256(&with(changes.clone()));
            assert_eq!(v.validate(&token, NOW), Err(error), "{changes}");
        }
        // Expecting no audience refuses a token that names one, as Kafka;
        // without an expected issuer any issuer passes.
        let open = JwtValidator::from_jwks_json(JWKS, None, None, None).unwrap();
        assert_eq!(
            open.validate(&es256(&claims()), NOW),
            Err(OAuthError::InvalidAudience)
        );
        let token = es256(&with(json!({"aud": null, "iss": "anyone"})));
        assert_eq!(open.validate(&token, NOW), Ok("alice".into()));
        let empty = JwtValidator::from_jwks_json(JWKS, Some(vec![]), None, None).unwrap();
        assert_eq!(empty.validate(&token, NOW), Ok("alice".into()));
    }

    #[test]
    fn principal_and_scope_claims_are_configurable() {
        let v = JwtValidator::from_jwks_json(
            JWKS,
            Some(vec!["kafka".into()]),
            None,
            Some("client_id".into()),
        )
        .unwrap()
        .with_scope_claim("scp");
        let token = es256(&with(
            json!({"client_id": "svc-1", "scp": ["read", "write"]}),
        ));
        let valid = v.validate_token(&token, NOW).unwrap();
        assert_eq!(valid.principal, "svc-1");
        assert_eq!(
            valid.scopes,
            BTreeSet::from(["read".into(), "write".into()])
        );
        assert_eq!(
            v.validate(&es256(&claims()), NOW),
            Err(OAuthError::MissingClaim("client_id".into()))
        );
    }

    #[test]
    fn scopes_as_kafka_reads_them() {
        let v = validator();
        let scopes = |scope: Value| {
            v.validate_token(&es256(&with(json!({ "scope": scope }))), NOW)
                .map(|t| t.scopes.into_iter().collect::<Vec<_>>())
        };
        // One string is one scope, spaces and all.
        assert_eq!(scopes(json!("read write")), Ok(vec!["read write".into()]));
        assert_eq!(
            scopes(json!(["b", " a "])),
            Ok(vec!["a".into(), "b".into()])
        );
        assert_eq!(scopes(json!(42)), Ok(vec![]));
        for bad in [json!(""), json!(["a", "a"]), json!(["a", " "]), json!([1])] {
            assert_eq!(
                scopes(bad.clone()),
                Err(OAuthError::InvalidClaim("scope".into())),
                "{bad}"
            );
        }
    }

    #[test]
    fn jwks_that_cannot_be_used() {
        for jwks in [
            "not json",
            "{}",
            r#"{"keys": {}}"#,
            r#"{"keys": []}"#,
            r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#,
            r#"{"keys": [{"kty": "EC", "crv": "P-521", "x": "AA", "y": "AA"}]}"#,
        ] {
            assert!(
                matches!(
                    JwtValidator::from_jwks_json(jwks, None, None, None),
                    Err(OAuthError::InvalidJwks(_))
                ),
                "{jwks}"
            );
        }
    }

    #[test]
    fn the_whole_exchange() {
        use super::super::{ClientInitialResponse, OAuthBearerServer};
        let v = validator();
        let message = |token: String| {
            ClientInitialResponse {
                token,
                authzid: None,
                extensions: Default::default(),
            }
            .to_bytes()
            .unwrap()
        };
        let mut server = OAuthBearerServer::new();
        let token = server
            .receive_client_response(&message(es256(&claims())))
            .unwrap()
            .token
            .clone();
        let principal = v.validate(&token, NOW).unwrap();
        assert_eq!(server.accept(&principal).unwrap(), b"");
        assert_eq!(server.authenticated_principal(), Some("alice"));

        let mut server = OAuthBearerServer::new();
        let token = server
            .receive_client_response(&message(es256(&claims())))
            .unwrap()
            .token
            .clone();
        assert!(v.validate(&token, NOW + 7200).is_err());
        server.reject();
        assert_eq!(
            server.receive_client_response(b"\x01").unwrap_err(),
            OAuthError::AuthenticationFailed
        );
    }

    proptest! {
        #[test]
        fn any_token_text_never_panics(token in "[A-Za-z0-9_.=-]{0,80}") {
            prop_assert!(validator().validate(&token, NOW).is_err());
        }
    }
}
