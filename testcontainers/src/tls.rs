//! A throwaway certificate authority for TLS tests.
//!
//! [`TestCa::generate`] makes a self-signed CA and a server certificate for
//! `127.0.0.1` and `localhost` signed by it, written as PEM files into a work
//! directory that lives as long as the value. Services started with it (see
//! [`SchemaRegistry::launch_tls`](crate::SchemaRegistry::launch_tls)) present
//! the server certificate; clients trust [`TestCa::ca_file`].

use std::fs;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::{process, Error, Result};

/// A CA with one server certificate, as PEM files.
pub struct TestCa {
    dir: PathBuf,
    ca: Certificate,
    ca_key: KeyPair,
}

impl TestCa {
    /// Generates the CA and a server certificate for 127.0.0.1 / localhost.
    pub fn generate() -> Result<TestCa> {
        let tls = |detail: rcgen::Error| Error::Tls {
            detail: detail.to_string(),
        };
        let ca_key = KeyPair::generate().map_err(tls)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(tls)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "pgcdc-kafka test CA");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = params.self_signed(&ca_key).map_err(tls)?;

        let dir = process::with_work_dir("tls", |dir| Ok(dir.to_path_buf()))?;
        let ca = TestCa { dir, ca, ca_key };
        ca.write("ca.pem", &ca.ca.pem())?;
        let (cert, key) = ca.issue(
            "127.0.0.1",
            &["127.0.0.1", "localhost"],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        ca.write("server.pem", &cert)?;
        ca.write("server-key.pem", &key)?;
        Ok(ca)
    }

    /// The CA certificate clients trust.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// The server certificate (PEM), for 127.0.0.1 and localhost.
    pub fn server_cert_file(&self) -> PathBuf {
        self.dir.join("server.pem")
    }

    /// The server certificate's private key (PKCS#8 PEM).
    pub fn server_key_file(&self) -> PathBuf {
        self.dir.join("server-key.pem")
    }

    /// Issues a client certificate with common name `name` (e.g. a Postgres
    /// role); returns the certificate and key files.
    pub fn client_cert(&self, name: &str) -> Result<(PathBuf, PathBuf)> {
        let (cert, key) = self.issue(name, &[], ExtendedKeyUsagePurpose::ClientAuth)?;
        let cert_file = self.write(&format!("client-{name}.pem"), &cert)?;
        let key_file = self.write(&format!("client-{name}-key.pem"), &key)?;
        Ok((cert_file, key_file))
    }

    /// The directory holding the PEM files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn issue(
        &self,
        common_name: &str,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<(String, String)> {
        let tls = |detail: rcgen::Error| Error::Tls {
            detail: detail.to_string(),
        };
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).map_err(tls)?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![usage];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate().map_err(tls)?;
        let cert = params
            .signed_by(&key, &self.ca, &self.ca_key)
            .map_err(tls)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    fn write(&self, name: &str, pem: &str) -> Result<PathBuf> {
        let path = self.dir.join(name);
        fs::write(&path, pem).map_err(Error::io(format!("write {}", path.display())))?;
        Ok(path)
    }
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::TestCa;

    #[test]
    fn writes_a_ca_and_a_server_certificate() {
        let ca = TestCa::generate().expect("generate");
        for file in [ca.ca_file(), ca.server_cert_file(), ca.server_key_file()] {
            let pem = std::fs::read_to_string(&file).expect("read pem");
            assert!(pem.starts_with("-----BEGIN "), "{}: {pem}", file.display());
        }
        let (cert, key) = ca.client_cert("pgcdc").expect("client cert");
        assert!(cert.exists() && key.exists());
        let dir = ca.dir().to_path_buf();
        drop(ca);
        assert!(!dir.exists(), "the PEM files are removed with the CA");
    }
}
