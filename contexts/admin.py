from django.contrib import admin

from contexts.models import (
    AuditEvent,
    Context,
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


class ReadOnlyAdmin(admin.ModelAdmin):
    """History is immutable: viewable, never editable."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class VersionInline(admin.TabularInline):
    model = FragmentVersion
    extra = 0
    fields = ("number", "title", "editor", "reason", "created_at")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


class PointerInline(admin.TabularInline):
    model = SourcePointer
    extra = 0
    raw_id_fields = ("document",)


@admin.register(Fragment)
class FragmentAdmin(admin.ModelAdmin):
    list_display = ("public_id", "title", "kind", "status", "negative", "owner", "version",
                    "last_edited_at")
    list_filter = ("org", "kind", "status", "negative")
    search_fields = ("public_id", "title", "body")
    raw_id_fields = ("superseded_by", "scope")
    readonly_fields = ("public_id", "uid", "version", "content_hash", "simhash", "scope_ids")
    inlines = [PointerInline, VersionInline]


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


admin.site.register(SourcePointer)
admin.site.register(Context)
admin.site.register(ContextSubscription)
admin.site.register(Pin)
admin.site.register(Link)
admin.site.register(Nudge)
admin.site.register(EmbeddingGeneration)
