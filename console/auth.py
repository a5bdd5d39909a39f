"""Who a request is and what they may do globally, each read with statements compiled once.

Token authentication for every API view is DRF's, with its one query compiled once; the
settings name it as the default too, so every view (the schema's included) authenticates
with one class and the OpenAPI schema shows one ``tokenAuth`` scheme. Models are imported
when a request comes, as DRF's own class does: DRF reads the settings' classes while Django
is still loading its apps. The global permissions of a user who is not a superuser (is
this a platform admin?) are Django's ModelBackend's, its two queries compiled once. With
the switch off (``console.fast``) both are DRF's and Django's own.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.db.models import QuerySet
from rest_framework.authentication import TokenAuthentication

from console import fast
from console.fast.statements import Statement, columns


def _token_and_user(shape: tuple[str, ...], key: str) -> QuerySet[Any]:
    """The token `key` with every column of its user (``shape``: the user's column names)."""
    from rest_framework.authtoken.models import Token

    tokens: QuerySet[Any] = Token.objects.filter(key=key)
    return tokens.values("key", "created", *(f"user__{c}" for c in shape))


_TOKEN_AND_USER = Statement(_token_and_user)


class CompiledTokenAuthentication(TokenAuthentication):
    """``Authorization: Token …``: the user, as DRF's ``select_related().get()`` reads it."""

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        """The token's active user and the token; DRF's own 401 for any other key."""
        from rest_framework.authtoken.models import Token

        if not fast.on():
            return super().authenticate_credentials(key)
        user_model = get_user_model()
        names = columns(user_model)
        found = _TOKEN_AND_USER.rows(key, shape=names)
        if not found or not found[0]["user__is_active"]:
            return super().authenticate_credentials(key)  # refuses in DRF's own words
        row = found[0]
        user = user_model.from_db("default", names, [row[f"user__{c}"] for c in names])
        token = Token.from_db(
            "default", ("key", "user_id", "created"), (row["key"], user.pk, row["created"])
        )
        token.user = user
        return user, token


def _permissions(shape: str, user_pk: int) -> QuerySet[Any]:
    """What ModelBackend reads of a user's permissions: ``shape`` "user" (own) or "group"."""
    from django.contrib.auth.models import Group, Permission

    if shape == "user":
        granted = Permission.objects.filter(user=user_pk)
    else:
        granted = Permission.objects.filter(group__in=Group.objects.filter(user=user_pk))
    return granted.values("content_type__app_label", "codename").order_by()


_PERMISSIONS = Statement(_permissions)


class CompiledModelBackend(ModelBackend):
    """Django's ModelBackend; a user's own and group permissions read by statements."""

    def get_user_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        """The user's own permissions, as ModelBackend finds and caches them."""
        return self._granted(user_obj, obj, "user")

    def get_group_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        """The permissions of the user's groups, as ModelBackend finds and caches them."""
        return self._granted(user_obj, obj, "group")

    def _granted(self, user_obj: Any, obj: Any, kind: str) -> set[str]:
        """``{"app_label.codename", …}``, cached on the user under ModelBackend's name."""
        plain = user_obj.is_active and not user_obj.is_anonymous and not user_obj.is_superuser
        cache = f"_{kind}_perm_cache"
        if not fast.on() or not plain or obj is not None or hasattr(user_obj, cache):
            known: set[str] = getattr(super(), f"get_{kind}_permissions")(user_obj, obj)
            return known
        rows = _PERMISSIONS.rows(user_obj.pk, shape=kind)
        granted = {f"{row['content_type__app_label']}.{row['codename']}" for row in rows}
        setattr(user_obj, cache, granted)
        return granted
