//! The authorizer: answers "may this principal, from this host, perform
//! this operation on this resource?" from the ACLs, with the rules of
//! Kafka's `StandardAuthorizer` (`StandardAuthorizerData`).
//!
//! It is pure (no I/O, no clock) and immutable: a broker builds a new one
//! from each new image ([`crate::MetadataImage::authorizer`]) and swaps it
//! in. The bindings are indexed by resource type, then by literal name and
//! by prefix, so a check costs a few map lookups whatever the number of
//! ACLs.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::acl::{
    AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType, WILDCARD,
    WILDCARD_PRINCIPAL,
};

/// The ACLs in the shape checks want, with the authorizer's settings.
#[derive(Clone, Debug, Default)]
pub struct Authorizer {
    by_type: HashMap<ResourceType, TypeAcls>,
    /// Principals (`User:admin`) allowed everything (Kafka's `super.users`).
    super_users: HashSet<String>,
    /// The answer for a resource no ACL applies to (Kafka's
    /// `allow.everyone.if.no.acl.found`).
    allow_everyone_if_no_acl_found: bool,
}

/// The ACLs of one resource type.
#[derive(Clone, Debug, Default)]
struct TypeAcls {
    /// By literal name, the wildcard `*` included.
    literal: HashMap<String, Vec<Entry>>,
    /// By prefix.
    prefixed: HashMap<String, Vec<Entry>>,
    /// The byte lengths of the prefixes in `prefixed`: the only prefixes of
    /// a resource name worth looking up.
    prefix_lengths: BTreeSet<usize>,
}

/// The part of a binding that is not its resource pattern (Kafka's
/// access control entry).
#[derive(Clone, Debug)]
struct Entry {
    principal: String,
    host: String,
    operation: AclOperation,
    permission: AclPermissionType,
}

impl Entry {
    /// Whether the entry concerns `principal` (or everyone) from `host` (or
    /// anywhere).
    fn applies_to(&self, principal: &str, host: &str) -> bool {
        (self.principal == principal || self.principal == WILDCARD_PRINCIPAL)
            && (self.host == WILDCARD || self.host == host)
    }

    /// Kafka's `findResult`: `Some(true)` if the entry allows the request,
    /// `Some(false)` if it denies it, `None` if it says nothing about it.
    ///
    /// `All` covers every operation. An ALLOW of Read, Write, Delete or
    /// Alter also allows Describe, and one of AlterConfigs allows
    /// DescribeConfigs; a DENY denies only its own operation (a DENY of
    /// Read leaves Describe to the other ACLs).
    fn decide(&self, principal: &str, host: &str, operation: AclOperation) -> Option<bool> {
        if !self.applies_to(principal, host) {
            return None;
        }
        let allow = self.permission == AclPermissionType::Allow;
        let covers = self.operation == AclOperation::All
            || self.operation == operation
            || (allow && implies(self.operation, operation));
        covers.then_some(allow)
    }
}

/// Whether an ALLOW of `granted` also allows `wanted`.
fn implies(granted: AclOperation, wanted: AclOperation) -> bool {
    use AclOperation::*;
    match wanted {
        Describe => matches!(granted, Read | Write | Delete | Alter),
        DescribeConfigs => granted == AlterConfigs,
        _ => false,
    }
}

impl TypeAcls {
    /// The entries of the bindings whose pattern names `resource_name`:
    /// literal with that name or `*`, prefixed with a prefix of it.
    fn applicable<'a>(&'a self, resource_name: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        let literal = self.literal.get(resource_name);
        let wildcard = (resource_name != WILDCARD)
            .then(|| self.literal.get(WILDCARD))
            .flatten();
        let prefixed = self
            .prefix_lengths
            .range(..=resource_name.len())
            .filter(|len| resource_name.is_char_boundary(**len))
            .filter_map(|len| self.prefixed.get(&resource_name[..*len]));
        literal
            .into_iter()
            .chain(wildcard)
            .chain(prefixed)
            .flatten()
    }

    /// Every (pattern type, name, entry) of the type.
    fn all(&self) -> impl Iterator<Item = (PatternType, &str, &Entry)> {
        entries_of(PatternType::Literal, &self.literal)
            .chain(entries_of(PatternType::Prefixed, &self.prefixed))
    }
}

fn entries_of(
    pattern_type: PatternType,
    by_name: &HashMap<String, Vec<Entry>>,
) -> impl Iterator<Item = (PatternType, &str, &Entry)> {
    by_name.iter().flat_map(move |(name, entries)| {
        entries
            .iter()
            .map(move |entry| (pattern_type, name.as_str(), entry))
    })
}

impl Authorizer {
    /// An authorizer over `bindings`. `super_users` are principals as
    /// `Type:name` (Kafka's `super.users`, split on `;`);
    /// `allow_everyone_if_no_acl_found` is the answer for a resource no
    /// binding names (Kafka's `allow.everyone.if.no.acl.found`, false by
    /// default).
    ///
    /// Bindings other than literal or prefixed are ignored: the image never
    /// holds one.
    pub fn new(
        bindings: impl IntoIterator<Item = AclBinding>,
        super_users: Vec<String>,
        allow_everyone_if_no_acl_found: bool,
    ) -> Self {
        let mut by_type: HashMap<ResourceType, TypeAcls> = HashMap::new();
        for binding in bindings {
            let acls = by_type.entry(binding.resource_type).or_default();
            let entry = Entry {
                principal: binding.principal,
                host: binding.host,
                operation: binding.operation,
                permission: binding.permission,
            };
            let name = binding.resource_name;
            match binding.pattern_type {
                PatternType::Literal => acls.literal.entry(name).or_default().push(entry),
                PatternType::Prefixed => {
                    acls.prefix_lengths.insert(name.len());
                    acls.prefixed.entry(name).or_default().push(entry);
                }
                PatternType::Unknown | PatternType::Any | PatternType::Match => {}
            }
        }
        Authorizer {
            by_type,
            super_users: super_users.into_iter().collect(),
            allow_everyone_if_no_acl_found,
        }
    }

    /// True if `principal` is a super user.
    pub fn is_super_user(&self, principal: &str) -> bool {
        self.super_users.contains(principal)
    }

    /// Whether `principal` (`User:alice`) connected from `host` (the client's
    /// IP address, as `127.0.0.1`) may perform `operation` on the resource
    /// `resource_name` of `resource_type`, as Kafka's `StandardAuthorizer`
    /// decides:
    ///
    /// 1. super users may do anything;
    /// 2. the bindings that apply are those of the type whose pattern names
    ///    the resource: literal with its name or `*`, prefixed with a
    ///    prefix of its name;
    /// 3. among those, one for the principal (or `User:*`) and the host (or
    ///    `*`) that DENIES the operation (or `All`) denies, whatever allows;
    /// 4. else one that ALLOWS it (or `All`, or an operation implying it:
    ///    Describe by Read, Write, Delete, Alter; DescribeConfigs by
    ///    AlterConfigs) allows;
    /// 5. else, if bindings apply to the resource (for any principal, host
    ///    or operation), the request is denied; if none does, the answer is
    ///    `allow_everyone_if_no_acl_found`.
    pub fn authorize(
        &self,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: &str,
    ) -> bool {
        if self.is_super_user(principal) {
            return true;
        }
        let Some(acls) = self.by_type.get(&resource_type) else {
            return self.allow_everyone_if_no_acl_found;
        };
        let mut any_acl = false;
        let mut allowed = false;
        for entry in acls.applicable(resource_name) {
            any_acl = true;
            match entry.decide(principal, host, operation) {
                Some(false) => return false,
                Some(true) => allowed = true,
                None => {}
            }
        }
        allowed || (!any_acl && self.allow_everyone_if_no_acl_found)
    }

    /// Whether `principal` from `host` may perform `operation` on at least
    /// one resource of `resource_type`, as Kafka's
    /// `Authorizer.authorizeByResourceType` (its fallback for
    /// IdempotentWrite, and for CreateTopics when a topic is not named by
    /// any ACL):
    ///
    /// 1. allowed if [`authorize`](Self::authorize) allows a resource named
    ///    `hardcode` (which lets super users through, and everyone when no
    ///    ACL names it and `allow_everyone_if_no_acl_found` is set);
    /// 2. the bindings of the type for the principal (or `User:*`), the host
    ///    (or `*`) and the operation itself or `All` (no implied
    ///    operations here) count; a literal DENY of `*` denies;
    /// 3. a literal ALLOW of `*` allows;
    /// 4. any other ALLOW allows unless DENYs cover it: a literal ALLOW by a
    ///    literal DENY of the same name, any ALLOW by a prefixed DENY whose
    ///    name is a prefix of (or equal to) the allowed name;
    /// 5. else denied.
    ///
    /// A filter (`Any`) or `Unknown` resource type or operation, which
    /// Kafka refuses with an exception, is denied.
    pub fn authorize_by_resource_type(
        &self,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        if matches!(resource_type, ResourceType::Any | ResourceType::Unknown)
            || matches!(operation, AclOperation::Any | AclOperation::Unknown)
        {
            return false;
        }
        if self.authorize(principal, host, operation, resource_type, "hardcode") {
            return true;
        }
        let Some(acls) = self.by_type.get(&resource_type) else {
            return false;
        };
        let mut denied_literal = HashSet::new();
        let mut denied_prefixes = HashSet::new();
        let mut allowed: Vec<(PatternType, &str)> = Vec::new();
        for (pattern_type, name, entry) in acls.all() {
            if !entry.applies_to(principal, host)
                || !(entry.operation == operation || entry.operation == AclOperation::All)
            {
                continue;
            }
            let literal = pattern_type == PatternType::Literal;
            match entry.permission {
                AclPermissionType::Deny if literal && name == WILDCARD => return false,
                AclPermissionType::Deny if literal => {
                    denied_literal.insert(name);
                }
                AclPermissionType::Deny => {
                    denied_prefixes.insert(name);
                }
                AclPermissionType::Allow => allowed.push((pattern_type, name)),
                AclPermissionType::Unknown | AclPermissionType::Any => {}
            }
        }
        if allowed
            .iter()
            .any(|(pattern_type, name)| *pattern_type == PatternType::Literal && *name == WILDCARD)
        {
            return true;
        }
        allowed.iter().any(|(pattern_type, name)| {
            let denied_as_literal =
                *pattern_type == PatternType::Literal && denied_literal.contains(name);
            let denied_by_prefix = name
                .char_indices()
                .map(|(i, c)| &name[..i + c.len_utf8()])
                .any(|prefix| denied_prefixes.contains(prefix));
            !denied_as_literal && !denied_by_prefix
        })
    }
}
