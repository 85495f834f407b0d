from django.contrib import admin

from contexts.models import (
    AuditEvent,
    Context,
    ContextOwner,
    ContextSubscription,
    EmbeddingGeneration,
    Fragment,
    FragmentVersion,
    Link,
    Nudge,
    Pin,
    SourceDocument,
    SourcePointer,
)
from contexts.services import fragments as fragment_service


class ReadOnlyAdmin(admin.ModelAdmin):
    """History is immutable: viewable, never editable."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class OwnerInline(admin.TabularInline):
    """A context's owners (``Context.owners`` has a through model, which Django's form leaves
    out); each row takes the context's organization."""

    model = ContextOwner
    extra = 0
    raw_id_fields = ("user",)


@admin.register(Context)
class ContextAdmin(admin.ModelAdmin):
    inlines = [OwnerInline]


class VersionInline(admin.TabularInline):
    model = FragmentVersion
    extra = 0
    fields = ("number", "title", "editor", "reason", "created_at")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


class PointerInline(admin.TabularInline):
    """Provenance, written by ingestion and merges: viewable here, never editable."""

    model = SourcePointer
    extra = 0
    fields = ("document", "anchor", "start_line", "end_line", "content_hash")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Fragment)
class FragmentAdmin(admin.ModelAdmin):
    """Fragments change only through :mod:`contexts.services.fragments`, here as anywhere.

    Saving the form becomes an edit (title, text and its chunking metadata) and/or a metadata
    change (kind, negative flag, owner) as the signed-in person, each with its version, audit
    event and change signal — exactly what a console edit writes. What has a door of its own
    (status: retire and supersede in the console; visibility: contexts) is read-only, and
    fragments are neither added nor deleted here (retire keeps the history).
    """

    TEXT_FIELDS = ("title", "body", "heading_path", "language", "symbol")
    METADATA_FIELDS = ("kind", "negative", "owner")

    list_display = ("public_id", "title", "kind", "status", "negative", "owner", "version",
                    "last_edited_at")
    list_filter = ("org", "kind", "status", "negative")
    search_fields = ("public_id", "title", "body")
    raw_id_fields = ("owner",)
    fields = ("public_id", "org", "scope", *TEXT_FIELDS, *METADATA_FIELDS, "status",
              "superseded_by", "version", "valid_from", "valid_to", "last_edited_at",
              "verified_at")
    readonly_fields = ("public_id", "org", "scope", "status", "superseded_by", "version",
                       "valid_from", "valid_to", "last_edited_at", "verified_at")
    inlines = [PointerInline, VersionInline]

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj: Fragment, form, change: bool) -> None:
        stored = Fragment.objects.get(pk=obj.pk)
        changed = set(form.changed_data)
        chunking = {name: getattr(obj, name) for name in ("heading_path", "language", "symbol")
                    if name in changed}
        if chunking or changed & {"title", "body"}:
            # The form was filled in from the row as it is now: based on the stored version.
            fragment_service.edit_fragment(request.user, stored,
                                           based_on_version=stored.version, body=obj.body,
                                           title=obj.title, reason="edited in the admin",
                                           **chunking)
        metadata = {name: getattr(obj, name) for name in self.METADATA_FIELDS
                    if name in changed}
        if metadata:
            fragment_service.update_metadata(request.user, [stored],
                                             reason="changed in the admin", **metadata)
        obj.refresh_from_db()


@admin.register(FragmentVersion)
class FragmentVersionAdmin(ReadOnlyAdmin):
    list_display = ("fragment", "number", "editor", "reason", "created_at")


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "action", "object_type", "object_id", "actor", "actor_token")
    list_filter = ("action", "org")


@admin.register(SourceDocument)
class SourceDocumentAdmin(admin.ModelAdmin):
    list_display = ("path", "org", "repository", "language", "ingested_at")
    list_filter = ("org", "language")
    search_fields = ("path",)


# Pointers (ingestion, merges), pins (the pin service), citation links (ingestion, merges,
# supersession) and nudges (their answers) each have their own door: read-only here.
admin.site.register(SourcePointer, ReadOnlyAdmin)
admin.site.register(ContextSubscription)
admin.site.register(Pin, ReadOnlyAdmin)
admin.site.register(Link, ReadOnlyAdmin)
admin.site.register(Nudge, ReadOnlyAdmin)
admin.site.register(EmbeddingGeneration)
