#!/bin/sh
# Regenerates the TLS test files (tests/serve.rs, tests/live.rs, crates/net/src/tls.rs).
# FOR TESTS ONLY: these keys are public; never trust ca.pem anywhere else.
#   ca.pem      a self-signed test CA (its key is thrown away)
#   server.pem  a server certificate for DNS name `localhost` only (not the
#               IP 127.0.0.1: a test uses that for a wrong-name failure),
#               signed by the CA
#   server.key  its private key (PKCS#8, ECDSA P-256)
#   other.key   an unrelated key (a key that does not match server.pem)
# Valid from 2020-01-01 (a machine whose clock is behind still accepts
# them) to 2120-01-01. Needs the openssl command line (1.1 or 3.x).
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
touch "$tmp/index.txt"
cat > "$tmp/ca.cnf" <<CNF
[ca]
default_ca = test
[test]
database = $tmp/index.txt
new_certs_dir = $tmp
serial = $tmp/serial
default_md = sha256
policy = any
unique_subject = no
copy_extensions = none
[any]
commonName = supplied
[ca_ext]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server_ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
CNF
echo 01 > "$tmp/serial"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }
dates="-startdate 20200101000000Z -enddate 21200101000000Z"
key "$tmp/ca.key"
openssl req -new -key "$tmp/ca.key" -subj "/CN=herdsim test CA (tests only)" -out "$tmp/ca.csr"
# shellcheck disable=SC2086
openssl ca -batch -notext -config "$tmp/ca.cnf" -selfsign -keyfile "$tmp/ca.key" \
  -extensions ca_ext $dates -in "$tmp/ca.csr" -out ca.pem
key server.key
openssl req -new -key server.key -subj "/CN=localhost" -out "$tmp/server.csr"
# shellcheck disable=SC2086
openssl ca -batch -notext -config "$tmp/ca.cnf" -cert ca.pem -keyfile "$tmp/ca.key" \
  -extensions server_ext $dates -in "$tmp/server.csr" -out server.pem
key other.key
