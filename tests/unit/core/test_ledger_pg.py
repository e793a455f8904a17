"""The PostgreSQL ledger's connection rules (issue 19): the password comes from the environment and never shows in
an error, TLS is verified by default, libpq's TLS parameters pass through.

Parameter names and sslmode values: libpq, https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PARAMKEYWORDS
and https://www.postgresql.org/docs/current/libpq-ssl.html#LIBPQ-SSL-PROTECTION (verify-full: encrypted, the CA
checked and the server's name matched).
"""

import urllib.parse

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core import ledger as _ledger
from ansible_collections.symphony.cluster.plugins.module_utils._core import ledger_pg as _pg
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import LedgerError
from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import GateVerdict

URL = "postgresql://symphony@ledger.example.internal:5432/symphony"


def test_password_from_the_environment_never_the_url():
    params, secrets = _pg.connection_params(URL, {"SYMPHONY_LEDGER_PASSWORD": "s3cret-ledger"})
    assert params["password"] == "s3cret-ledger" and "s3cret-ledger" in secrets
    # a named variable (password_env, ours) wins and is not passed on to libpq
    params, _password = _pg.connection_params(URL + "?password_env=AWX_LEDGER_PW",
                                              {"AWX_LEDGER_PW": "from-awx", "SYMPHONY_LEDGER_PASSWORD": "other"})
    assert params["password"] == "from-awx" and "password_env" not in params
    with pytest.raises(LedgerError, match="password_env names AWX_LEDGER_PW, which is not set"):
        _pg.connection_params(URL + "?password_env=AWX_LEDGER_PW", {})
    # neither: libpq's own PGPASSWORD / ~/.pgpass apply, nothing is invented
    assert "password" not in _pg.connection_params(URL, {})[0]


def test_tls_is_verified_by_default_and_options_pass_through():
    assert _pg.connection_params(URL, {})[0]["sslmode"] == "verify-full"
    params, _password = _pg.connection_params(URL + "?sslmode=verify-ca&sslrootcert=/etc/pki/ledger-ca.pem", {})
    assert (params["sslmode"], params["sslrootcert"]) == ("verify-ca", "/etc/pki/ledger-ca.pem")
    assert "sslmode" not in _pg.connection_params(URL, {"PGSSLMODE": "require"})[0]  # libpq reads PGSSLMODE itself
    # a unix socket is local: no TLS to verify
    assert "sslmode" not in _pg.connection_params("postgresql:///symphony?host=/run/postgresql", {})[0]


def test_query_values_keep_their_spaces_and_plus_signs():
    """libpq URIs are percent-encoded (RFC 3986): %20 is a space, "+" is a plus; two -c settings stay two."""
    params, _password = _pg.connection_params(URL + "?options=-csearch_path%3Dt1%20-csynchronous_commit%3Doff"
                                              "&application_name=a+b&password_env=PW", {"PW": "x"})
    assert params["options"] == "-csearch_path=t1 -csynchronous_commit=off"
    assert params["application_name"] == "a+b"


def test_redact_hides_a_password_in_the_url():
    assert _pg.redact("postgresql://u:hunter2@db:5432/x?sslmode=verify-full") == \
        "postgresql://u:********@db:5432/x?sslmode=verify-full"
    assert _pg.redact(URL) == URL


def test_a_wrong_password_is_a_ledger_error_that_does_not_show_it(pg_ledger, monkeypatch):
    monkeypatch.setenv("SYMPHONY_LEDGER_PASSWORD", "wrong-Pa55word-xyz")
    with pytest.raises(LedgerError) as err:
        _ledger.open_ledger(pg_ledger)
    assert "password authentication failed" in str(err.value)
    assert "wrong-Pa55word-xyz" not in str(err.value) and "wrong-Pa55word-xyz" not in repr(err.value.to_dict())


def test_a_password_in_the_url_is_masked_in_errors(pg_server, pg_ledger):
    parts = urllib.parse.urlsplit(pg_ledger)
    bad = urllib.parse.urlunsplit(parts._replace(netloc="symphony:Url-pa55-zz@127.0.0.1:1"))
    with pytest.raises(LedgerError) as err:
        _ledger.open_ledger(bad)
    assert "Url-pa55-zz" not in str(err.value) and "********" in str(err.value)


def test_verify_full_without_the_servers_ca_is_refused(pg_ledger):
    """The throw-away server's certificate is signed by its own CA: without sslrootcert, verify-full refuses it."""
    parts = urllib.parse.urlsplit(pg_ledger)
    query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query) if k != "sslrootcert"]
    query.append(("sslrootcert", "system"))  # the system CA store (libpq >= 16 keyword; older: a missing file)
    with pytest.raises(LedgerError, match="cannot open ledger"):
        _ledger.open_ledger(urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query))))


def test_two_clients_see_each_others_gates(pg_ledger):
    """What AWX needs: a gate one job template wrote is the next one's input (two connections, one ledger)."""
    first, second = _ledger.open_ledger(pg_ledger), _ledger.open_ledger(pg_ledger)
    try:
        first.record_gate(GateVerdict("gpu-r01-u02", "pre_deployment", "pass", "all required checks passed"), "pre-1")
        assert second.node_position("gpu-r01-u02") == ("pre_deployment", "pass")
    finally:
        first.close()
        second.close()
