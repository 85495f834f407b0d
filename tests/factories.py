"""factory_boy factories for the domain model (real rows in the real database)."""

import factory
from django.contrib.auth import get_user_model

from accounts.models import Membership, Organization, Persona, Repository, Role, Session


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password("pw-for-tests-only")


class OrganizationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Organization

    slug = factory.Sequence(lambda n: f"org{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())


class RepositoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Repository

    org = factory.SubFactory(OrganizationFactory)
    slug = factory.Sequence(lambda n: f"repo{n}")
    name = factory.LazyAttribute(lambda r: r.slug)


class PersonaFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Persona

    org = factory.SubFactory(OrganizationFactory)
    slug = factory.Sequence(lambda n: f"persona{n}")
    name = factory.LazyAttribute(lambda p: p.slug)


class SessionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Session

    org = factory.SubFactory(OrganizationFactory)
    external_id = factory.Sequence(lambda n: f"iss_2026-03-19-{n:03d}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    org = factory.SubFactory(OrganizationFactory)
    role = Role.VIEWER
