//! Certificates for TLS tests, made with rcgen: a CA, and keys with
//! certificates it signed, written as PEM files in a temporary directory.

use std::path::PathBuf;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

pub struct Pki {
    dir: tempfile::TempDir,
    issuer: CertifiedIssuer<'static, KeyPair>,
    /// The CA's certificate, PEM.
    pub ca: PathBuf,
}

/// A key and its certificate, apart and together.
pub struct Identity {
    pub certificate: PathBuf,
    pub key: PathBuf,
    /// Key and certificate in one file: a PEM key store.
    pub keystore: PathBuf,
}

impl Pki {
    /// A CA named `name`.
    pub fn new(name: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, issuer.pem()).unwrap();
        Self { dir, issuer, ca }
    }

    /// A broker's certificate for `names` (DNS names or IP addresses).
    pub fn server(&self, file: &str, names: &[&str]) -> Identity {
        self.issue(
            file,
            names,
            "weir broker",
            &[ExtendedKeyUsagePurpose::ServerAuth],
            |_| {},
        )
    }

    /// A node's certificate for `names`, with subject CN=`name`, good for
    /// both ends of a connection between nodes (server and client).
    pub fn node(&self, file: &str, names: &[&str], name: &str) -> Identity {
        self.issue(
            file,
            names,
            name,
            &[
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
            |_| {},
        )
    }

    /// A client's certificate with subject CN=`name`.
    pub fn client(&self, file: &str, name: &str) -> Identity {
        self.client_with(file, name, |_| {})
    }

    /// A client's certificate with subject CN=`name`, its parameters
    /// changed by `adjust` (more of the subject, a validity in the past).
    pub fn client_with(
        &self,
        file: &str,
        name: &str,
        adjust: impl FnOnce(&mut CertificateParams),
    ) -> Identity {
        self.issue(
            file,
            &[],
            name,
            &[ExtendedKeyUsagePurpose::ClientAuth],
            adjust,
        )
    }

    fn issue(
        &self,
        file: &str,
        names: &[&str],
        common_name: &str,
        purposes: &[ExtendedKeyUsagePurpose],
        adjust: impl FnOnce(&mut CertificateParams),
    ) -> Identity {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = purposes.to_vec();
        adjust(&mut params);
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let path = |suffix: &str| self.dir.path().join(format!("{file}{suffix}"));
        let identity = Identity {
            certificate: path(".crt"),
            key: path(".key"),
            keystore: path("-keystore.pem"),
        };
        std::fs::write(&identity.certificate, cert.pem()).unwrap();
        std::fs::write(&identity.key, key.serialize_pem()).unwrap();
        std::fs::write(
            &identity.keystore,
            format!("{}{}", key.serialize_pem(), cert.pem()),
        )
        .unwrap();
        identity
    }

    /// A file in this directory holding `text`.
    pub fn write(&self, file: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(file);
        std::fs::write(&path, text).unwrap();
        path
    }
}
