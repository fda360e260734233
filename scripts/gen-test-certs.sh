#!/bin/sh
# Generates the TLS test certificates into DIR (created if needed), with the
# openssl command line, EC P-256 keys (fast handshakes):
#   ca.pem/ca.key            the test CA
#   other-ca.pem/other-ca.key  an unrelated CA (wrong-CA tests)
#   server.pem/server.key    server cert signed by ca: SAN DNS:localhost,
#                            DNS:server.test, IP:127.0.0.1, IP:::1
#   client.pem/client.key    client cert signed by ca (CN=sluice-test-client)
#   expired.pem/expired.key  server cert signed by ca, expired yesterday
#   wronghost.pem/wronghost.key  server cert signed by ca for DNS:wrong.test
#   untrusted.pem/untrusted.key  server cert signed by other-ca
# Usage: scripts/gen-test-certs.sh DIR
set -eu
dir=${1:?usage: gen-test-certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
# Everything is regenerated each time; quiet unless something fails.
exec 3>&2 2>openssl.log
trap 'rc=$?; [ $rc -ne 0 ] && cat openssl.log >&3; exit $rc' EXIT

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }

ca() { # name subject
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -sha256 -days 3650 -subj "$2" \
    -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign -out "$1.pem"
}

# leaf name ca subject san extkeyusage [days-offset-start days-offset-end]
leaf() {
  key "$1.key"
  openssl req -new -key "$1.key" -subj "$3" -out "$1.csr"
  printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n%s\n' \
    "$5" "$4" >"$1.ext"
  if [ "${6:-}" = expired ]; then
    sign_expired "$1" "$2"
  else
    openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" \
      -CAcreateserial -sha256 -days 825 -extfile "$1.ext" -out "$1.pem"
  fi
  rm -f "$1.csr" "$1.ext"
}

# OpenSSL 3.0's x509 cannot backdate: sign with "openssl ca", which takes
# explicit start and end dates (valid for one day in 2020).
sign_expired() {
  mkdir -p ca.db
  : >ca.db/index.txt
  printf '1000\n' >ca.db/serial
  cat >ca.db/ca.cnf <<CNF
[ca]
default_ca = test
[test]
database = ca.db/index.txt
serial = ca.db/serial
new_certs_dir = ca.db
default_md = sha256
policy = any
copy_extensions = none
[any]
commonName = supplied
CNF
  openssl ca -batch -config ca.db/ca.cnf -cert "$2.pem" -keyfile "$2.key" \
    -in "$1.csr" -out "$1.pem" -notext -startdate 20200101000000Z \
    -enddate 20200102000000Z -extfile "$1.ext"
  rm -rf ca.db
}

ca ca "/CN=sluice test CA"
ca other-ca "/CN=sluice other CA"
leaf server ca "/CN=server.test" \
  "subjectAltName=DNS:localhost,DNS:server.test,IP:127.0.0.1,IP:::1" serverAuth
leaf client ca "/CN=sluice-test-client" "subjectAltName=DNS:client.test" \
  clientAuth
leaf expired ca "/CN=server.test" \
  "subjectAltName=DNS:localhost,DNS:server.test,IP:127.0.0.1" serverAuth \
  expired
leaf wronghost ca "/CN=wrong.test" "subjectAltName=DNS:wrong.test" serverAuth
leaf untrusted other-ca "/CN=server.test" \
  "subjectAltName=DNS:localhost,DNS:server.test,IP:127.0.0.1" serverAuth
rm -f ./*.srl
