"""The local user pools sign with a key of this start, never with the one in
moto's package, and serve exactly that key's public half."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
import requests
from joserfc import jwt
from joserfc.errors import BadSignatureError
from joserfc.jwk import KeySet, RSAKey
from moto import mock_aws
from moto.utilities.utils import load_resource

from local_stack.cognito import user_pool as cognito

PASSWORD = "Passw0rd!Passw0rd"


@pytest.fixture
def idp() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("cognito-idp", region_name="us-east-1")


def new_pool(idp: Any) -> tuple[str, str]:
    pool = idp.create_user_pool(PoolName="p")["UserPool"]["Id"]
    client = idp.create_user_pool_client(
        UserPoolId=pool, ClientName="c", ExplicitAuthFlows=["ALLOW_ADMIN_USER_PASSWORD_AUTH"]
    )["UserPoolClient"]["ClientId"]
    idp.admin_create_user(UserPoolId=pool, Username="u", TemporaryPassword=PASSWORD, MessageAction="SUPPRESS")
    idp.admin_set_user_password(UserPoolId=pool, Username="u", Password=PASSWORD, Permanent=True)
    return pool, client


def id_token(idp: Any, pool: str, client: str) -> str:
    result = idp.admin_initiate_auth(
        UserPoolId=pool,
        ClientId=client,
        AuthFlow="ADMIN_USER_PASSWORD_AUTH",
        AuthParameters={"USERNAME": "u", "PASSWORD": PASSWORD},
    )
    return str(result["AuthenticationResult"]["IdToken"])


def served_jwks(pool: str) -> requests.Response:
    return requests.get(f"https://cognito-idp.us-east-1.amazonaws.com/{pool}/.well-known/jwks.json", timeout=5)


def test_tokens_verify_against_the_pools_jwks_only(idp: Any) -> None:
    pool, client = new_pool(idp)
    token = id_token(idp, pool, client)
    keys = served_jwks(pool).json()
    assert jwt.decode(token, KeySet.import_key_set(keys)).claims["cognito:username"] == "u"
    bundled = RSAKey.import_key(load_resource("cognitoidp/resources/jwks-public.json")["keys"][0])
    with pytest.raises(BadSignatureError):
        jwt.decode(token, bundled)
    assert keys["keys"][0]["n"] != bundled.as_dict()["n"]
    assert "d" not in keys["keys"][0]  # the public half only


def test_each_start_has_its_own_key_and_earlier_pools_keep_theirs(idp: Any) -> None:
    first_pool, _ = new_pool(idp)
    first_keys = served_jwks(first_pool).json()
    cognito.new_signing_key()  # what the emulator does at every start
    second_pool, second_client = new_pool(idp)
    second_keys = served_jwks(second_pool).json()
    assert first_keys["keys"][0]["n"] != second_keys["keys"][0]["n"]
    assert served_jwks(first_pool).json() == first_keys
    token = id_token(idp, second_pool, second_client)
    assert jwt.decode(token, KeySet.import_key_set(second_keys)).header["kid"] == second_keys["keys"][0]["kid"]
    with pytest.raises(BadSignatureError):
        jwt.decode(token, KeySet.import_key_set(first_keys).keys[0])


def test_no_keys_for_a_pool_that_does_not_exist(idp: Any) -> None:
    assert served_jwks("us-east-1_doesnotexist").status_code == 404
