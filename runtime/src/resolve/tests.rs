//! Plans made over synthetic registries: the same walk for a launch and a bundle, sets real or
//! dummy by device, the twin swap, and the checks a plan passes.

use std::collections::BTreeSet;

use sycl_format::aspects::aspect_number;
use sycl_format::{
    sets, CudaArch, DeviceRequirements, Image, ImageFormat, ImageSet, Property, PropertySet,
    PropertyValue, Target,
};

use super::*;

fn caps(aspects: &[&str]) -> Capabilities {
    Capabilities {
        aspects: aspects.iter().map(|a| aspect_number(a).unwrap()).collect::<BTreeSet<u32>>(),
        sub_group_sizes: vec![],
        max_work_group_size: 4096,
        links_images: true,
        target: None,
        fma: true,
        compute_capability: None,
    }
}

fn image(format: ImageFormat, target: Target, kernels: &[&str], sets: Vec<PropertySet>) -> Image {
    Image {
        format,
        target: target.name().into(),
        kernels: kernels.iter().map(|k| k.to_string()).collect(),
        property_sets: sets,
        data: kernels.join(",").into_bytes(),
    }
}

fn spirv(kernels: &[&str], sets: Vec<PropertySet>) -> Image {
    image(ImageFormat::SpirV, Target::Spir64, kernels, sets)
}

fn exports(symbols: &[&str]) -> PropertySet {
    PropertySet::symbols(sets::EXPORTED_SYMBOLS, symbols.iter().copied())
}

fn imports(symbols: &[&str]) -> PropertySet {
    PropertySet::symbols(sets::IMPORTED_SYMBOLS, symbols.iter().copied())
}

/// A set image's `SYCL/virtual functions`.
fn member_of(set: &str, dummy: bool) -> PropertySet {
    let mut properties =
        vec![Property::new("virtual-functions-set", PropertyValue::String(set.into()))];
    if dummy {
        properties.push(Property::new("dummy-image", PropertyValue::U32(1)));
    }
    PropertySet { name: sets::VIRTUAL_FUNCTIONS.into(), properties }
}

/// A kernel image's `SYCL/virtual functions`: the sets it uses.
fn uses(sets_used: &str) -> PropertySet {
    PropertySet {
        name: sets::VIRTUAL_FUNCTIONS.into(),
        properties: vec![Property::new(
            "uses-virtual-functions-set",
            PropertyValue::String(sets_used.into()),
        )],
    }
}

fn needs(aspect: &str) -> PropertySet {
    DeviceRequirements { aspects: vec![aspect_number(aspect).unwrap()], ..Default::default() }
        .to_property_set()
        .unwrap()
}

/// An app whose kernel `construct` only refers to a method table of set `s` (no call, no
/// import: the use is recorded), `s` real (needs fp16) and dummy, and a kernel `call` that
/// calls through it; and a library with a set `t` whose method `m` the app imports.
fn app_with_sets() -> Registry {
    let app = ImageSet {
        images: vec![
            spirv(&["construct"], vec![uses("s")]),
            spirv(&[], vec![exports(&["f"]), member_of("s", false), needs("fp16")]),
            spirv(&[], vec![exports(&["f"]), member_of("s", true)]),
            spirv(&["call"], vec![uses("s")]),
            spirv(&["uses_lib"], vec![imports(&["m"])]),
        ],
    };
    let lib = ImageSet { images: vec![spirv(&[], vec![exports(&["m"]), member_of("t", false)])] };
    Registry::from_binaries(vec![("app".into(), app), ("libt.so".into(), lib)])
}

fn names(registry: &Registry, plan: &Plan) -> Vec<String> {
    plan.images.iter().map(|&id| registry.describe(id)).collect()
}

fn id(registry: &Registry, binary: usize, image: u32) -> ImageId {
    ImageId { binary: registry.binaries[binary].id, image }
}

#[test]
fn a_bundle_links_a_set_used_only_through_a_table_real_or_dummy_as_a_launch_does() {
    let registry = app_with_sets();
    let spirv = Target::Spir64;
    for (aspects, set_image) in [(&["fp16"][..], "app image 1"), (&[][..], "app image 2")] {
        let caps = caps(aspects);
        let device = ForDevice { name: "dev", caps: &caps };
        let launch = plan_kernel(&registry, "construct", &[spirv], device).unwrap();
        let bundle = plan_bundle(&registry, &[id(&registry, 0, 0)], spirv, device).unwrap();
        assert_eq!(names(&registry, &launch), names(&registry, &bundle));
        // The kernel, the set's image the device can run, and the set's other user.
        assert_eq!(names(&registry, &launch), ["app image 0", set_image, "app image 3"]);
    }
}

#[test]
fn a_bundle_of_every_image_links_one_image_per_set() {
    let registry = app_with_sets();
    let caps = caps(&[]);
    let device = ForDevice { name: "dev", caps: &caps };
    let all: Vec<ImageId> = (0..5).map(|i| id(&registry, 0, i)).collect();
    let plan = plan_bundle(&registry, &all, Target::Spir64, device).unwrap();
    // The set's images stand for the set: its dummy only, on a device without fp16; the
    // library's set comes whole through the import of its method.
    assert_eq!(
        names(&registry, &plan),
        ["app image 0", "app image 3", "app image 4", "app image 2", "libt.so image 0"]
    );
}

#[test]
fn a_virtual_function_imported_by_name_links_its_set() {
    let registry = app_with_sets();
    let caps = caps(&[]);
    let device = ForDevice { name: "dev", caps: &caps };
    let plan = plan_kernel(&registry, "uses_lib", &[Target::Spir64], device).unwrap();
    assert_eq!(names(&registry, &plan), ["app image 4", "libt.so image 0"]);
}

#[test]
fn a_bundle_with_an_import_nobody_exports_names_the_importing_image() {
    let app = ImageSet { images: vec![spirv(&["k"], vec![imports(&["missing"])])] };
    let registry = Registry::from_binaries(vec![("app".into(), app)]);
    let caps = caps(&[]);
    let device = ForDevice { name: "dev", caps: &caps };
    let e = plan_bundle(&registry, &[id(&registry, 0, 0)], Target::Spir64, device).unwrap_err();
    assert!(
        e.to_string().starts_with(
            "unresolved device symbol `missing` imported for kernel `(bundle of app image 0)`"
        ),
        "{e}"
    );
}

#[test]
fn a_plan_with_an_image_the_device_cannot_run_is_refused() {
    let app = ImageSet { images: vec![spirv(&["k"], vec![needs("fp16")])] };
    let registry = Registry::from_binaries(vec![("app".into(), app)]);
    let caps = caps(&[]);
    let device = ForDevice { name: "dev", caps: &caps };
    let e = plan_bundle(&registry, &[id(&registry, 0, 0)], Target::Spir64, device).unwrap_err();
    assert!(matches!(e, Error::KernelNotSupported { ref kernel, .. } if kernel == "k"), "{e}");
    let e = plan_kernel(&registry, "k", &[Target::Spir64], device).unwrap_err();
    assert!(matches!(e, Error::KernelNotSupported { ref kernel, .. } if kernel == "k"), "{e}");
}

#[test]
fn a_set_that_leaves_an_import_unexported_is_refused_before_any_driver() {
    // The dummy of `s` lacks `g`, which the kernel also imports from the set: the walk links
    // the dummy, and the plan's last check names what nobody exports.
    let app = ImageSet {
        images: vec![
            spirv(&["k"], vec![imports(&["f", "g"])]),
            spirv(&[], vec![exports(&["f", "g"]), member_of("s", false), needs("fp16")]),
            spirv(&[], vec![exports(&["f"]), member_of("s", true)]),
        ],
    };
    let registry = Registry::from_binaries(vec![("app".into(), app)]);
    let caps = caps(&[]);
    let device = ForDevice { name: "dev", caps: &caps };
    let e = plan_kernel(&registry, "k", &[Target::Spir64], device).unwrap_err();
    assert!(matches!(e, Error::UnresolvedSymbol { ref symbol, .. } if symbol == "g"), "{e}");
}

fn ptx(target: Target, kernels: &[&str], sets: Vec<PropertySet>, data: &[u8]) -> Image {
    Image { data: data.to_vec(), ..image(ImageFormat::Ptx, target, kernels, sets) }
}

/// An app whose kernel imports `f`, with a twin that compiled in the image `libf.so` exports
/// it from; `first`, when given, is a library loaded before it that exports another `f`.
fn with_twin(first: Option<&[u8]>) -> Registry {
    let plain = ptx(Target::Ptx64, &["k"], vec![imports(&["f"])], b"plain");
    let hash = format!("{:016x}", sycl_format::payload_hash(b"f from libf"));
    let inlined = PropertySet {
        name: sets::INLINED_IMPORTS.into(),
        properties: vec![Property::new("f", PropertyValue::String(hash))],
    };
    let twin = ptx(Target::Ptx64Inlined, &["k"], vec![inlined], b"twin");
    let provider = |data: &[u8]| ImageSet {
        images: vec![ptx(Target::Ptx64, &[], vec![exports(&["f"])], data)],
    };
    let mut binaries = vec![("app".to_string(), ImageSet { images: vec![twin, plain] })];
    if let Some(data) = first {
        binaries.push(("preloaded.so".into(), provider(data)));
    }
    binaries.push(("libf.so".into(), provider(b"f from libf")));
    Registry::from_binaries(binaries)
}

#[test]
fn the_inlined_twin_replaces_exactly_the_images_it_compiled_in() {
    let caps = caps(&[]);
    let device = ForDevice { name: "gpu", caps: &caps };
    let forms = [Target::Ptx64];
    let registry = with_twin(None);
    let plan = plan_kernel(&registry, "k", &forms, device).unwrap();
    assert_eq!(plan.target(), Target::Ptx64Inlined);
    assert_eq!(plan.images.len(), 1);
    assert_eq!(registry.image(plan.images[0]).data, b"twin");

    // Another `f` first in loader order (LD_PRELOAD): the images resolution picked.
    let registry = with_twin(Some(b"another f"));
    let plan = plan_kernel(&registry, "k", &forms, device).unwrap();
    assert_eq!(plan.target(), Target::Ptx64);
    assert_eq!(names(&registry, &plan), ["app image 1", "preloaded.so image 0"]);
    assert_eq!(registry.image(plan.images[1]).data, b"another f");
}

fn native(arch: CudaArch, kernels: &[&str], sets: Vec<PropertySet>, data: &[u8]) -> Image {
    let target = Target::NvidiaGpu(arch);
    Image { data: data.to_vec(), ..image(ImageFormat::Native, target, kernels, sets) }
}

/// An app whose kernel imports `f` from `libf.so`, both with PTX; the app also with native
/// code for sm_90, the library with native code for `lib_archs`.
fn gpu_app(lib_archs: &[CudaArch]) -> Registry {
    let app = ImageSet {
        images: vec![
            ptx(Target::Ptx64, &["k"], vec![imports(&["f"])], b"k ptx"),
            native(CudaArch::Sm90, &["k"], vec![imports(&["f"])], b"k sm_90"),
        ],
    };
    let mut lib = vec![ptx(Target::Ptx64, &[], vec![exports(&["f"])], b"f ptx")];
    lib.extend(
        lib_archs.iter().map(|&a| native(a, &[], vec![exports(&["f"])], a.name().as_bytes())),
    );
    Registry::from_binaries(vec![("app".into(), app), ("libf.so".into(), ImageSet { images: lib })])
}

#[test]
fn native_code_comes_first_and_a_library_without_it_makes_the_program_ptx() {
    let mut caps = caps(&["gpu"]);
    caps.target = Some(Target::Ptx64);
    caps.compute_capability = Some((9, 0));
    let device = ForDevice { name: "gpu", caps: &caps };
    let forms = caps.forms();
    let registry = gpu_app(&[CudaArch::Sm90]);
    let plan = plan_kernel(&registry, "k", &forms, device).unwrap();
    assert_eq!(plan.target(), Target::NvidiaGpu(CudaArch::Sm90));
    let data: Vec<&[u8]> = plan.images.iter().map(|&id| &registry.image(id).data[..]).collect();
    assert_eq!(data, [&b"k sm_90"[..], b"sm_90"]);

    // The library has native code for another architecture only: all of it from PTX.
    let registry = gpu_app(&[CudaArch::Sm80]);
    let plan = plan_kernel(&registry, "k", &forms, device).unwrap();
    assert_eq!(plan.target(), Target::Ptx64);
    let data: Vec<&[u8]> = plan.images.iter().map(|&id| &registry.image(id).data[..]).collect();
    assert_eq!(data, [&b"k ptx"[..], b"f ptx"]);
}

#[test]
fn a_gpu_only_other_architectures_native_code_serves_is_told_so() {
    let mut caps = caps(&["gpu"]);
    caps.target = Some(Target::Ptx64);
    caps.compute_capability = Some((8, 0));
    let device = ForDevice { name: "A100", caps: &caps };
    let app = ImageSet { images: vec![native(CudaArch::Sm90, &["k"], vec![], b"k sm_90")] };
    let registry = Registry::from_binaries(vec![("app".into(), app)]);
    let e = plan_kernel(&registry, "k", &caps.forms(), device).unwrap_err();
    assert!(matches!(e, Error::KernelNotSupported { .. }), "{e}");
    assert!(e.to_string().contains(
        "the binaries carry native code for sm_90 and no PTX, and this GPU is of compute \
         capability 8.0: build with the ptx64 target, or nvidia_gpu_sm_80"
    ));
}

#[test]
fn a_definition_that_comes_along_with_other_symbols_gives_way_to_the_first_in_loader_order() {
    // The app imports `h` and `g`, never `f`; libf.so exports `f` and `h`, libfg.so `f` and
    // `g`, each in one image. Each import takes its library's image, and `f` comes along with
    // both: libf.so's, first in loader order, serves every caller; libfg.so's becomes an import.
    let app = ImageSet { images: vec![spirv(&["k"], vec![imports(&["h", "g"])])] };
    let libf = ImageSet { images: vec![spirv(&[], vec![exports(&["f", "h"])])] };
    let libfg = ImageSet { images: vec![spirv(&[], vec![exports(&["f", "g"])])] };
    let registry = Registry::from_binaries(vec![
        ("app".into(), app),
        ("libf.so".into(), libf),
        ("libfg.so".into(), libfg),
    ]);
    let root = [id(&registry, 0, 0)];
    let any = |_: ImageId| true;
    let lenient =
        collect::collect(&registry, Target::Spir64, Subject::Kernel("k"), &root, &any, false)
            .unwrap();
    assert_eq!(lenient.images.len(), 3, "both libraries are linked: {:?}", lenient.images);
    assert_eq!(lenient.overridden, [(id(&registry, 2, 0), vec!["f".to_string()])]);
    let strict =
        collect::collect(&registry, Target::Spir64, Subject::Kernel("k"), &root, &any, true)
            .unwrap_err();
    assert_eq!(
        strict.to_string(),
        "device symbol `f` is exported by more than one binary: libf.so image 0, libfg.so image 0 (strict mode)"
    );
}

/// An image of one form: kernels, property sets, bytes.
type Form<'a> = &'a dyn Fn(&[&str], Vec<PropertySet>, &[u8]) -> Image;

/// `app`'s kernel imports `g`; libf.so, first in loader order, exports `f`; libfg.so `f` and
/// `g`, its `g` calling its `f` (as a library's image records nothing of): each binary with an
/// image of each of `forms`, and the app with `extra` images too.
fn shadowed(forms: &[Form<'_>], extra: Vec<Image>) -> Registry {
    let binary = |kernels: &[&str], sets: Vec<PropertySet>, data: &[u8]| ImageSet {
        images: forms.iter().map(|form| form(kernels, sets.clone(), data)).collect(),
    };
    let mut app = binary(&["k"], vec![imports(&["g"])], b"k");
    app.images.extend(extra);
    Registry::from_binaries(vec![
        ("app".into(), app),
        ("libf.so".into(), binary(&[], vec![exports(&["f"])], b"f")),
        ("libfg.so".into(), binary(&[], vec![exports(&["f", "g"])], b"fg")),
    ])
}

fn spirv_form(kernels: &[&str], sets: Vec<PropertySet>, data: &[u8]) -> Image {
    Image { data: data.to_vec(), ..spirv(kernels, sets) }
}

fn ptx_form(kernels: &[&str], sets: Vec<PropertySet>, data: &[u8]) -> Image {
    ptx(Target::Ptx64, kernels, sets, &[data, b" ptx"].concat())
}

fn sm_90_form(kernels: &[&str], sets: Vec<PropertySet>, data: &[u8]) -> Image {
    native(CudaArch::Sm90, kernels, sets, &[data, b" sm_90"].concat())
}

fn h200() -> Capabilities {
    let mut caps = caps(&["gpu"]);
    caps.target = Some(Target::Ptx64);
    caps.compute_capability = Some((9, 0));
    caps
}

#[test]
fn the_winner_is_linked_though_nothing_imports_it_and_calls_inside_the_loser_reach_it() {
    let registry = shadowed(&[&spirv_form], vec![]);
    let caps = caps(&[]);
    let device = ForDevice { name: "dev", caps: &caps };
    let plan = plan_kernel(&registry, "k", &[Target::Spir64], device).unwrap();
    assert_eq!(names(&registry, &plan), ["app image 0", "libfg.so image 0", "libf.so image 0"]);
    assert_eq!(plan.overridden_in(id(&registry, 2, 0)), ["f"]);
    assert!(plan.overridden_in(id(&registry, 1, 0)).is_empty());
}

#[test]
fn native_objects_with_an_overridden_definition_give_way_to_ptx_and_no_twin_is_used() {
    let caps = h200();
    let device = ForDevice { name: "gpu", caps: &caps };
    let twin = ptx(Target::Ptx64Inlined, &["k"], vec![], b"twin");
    let registry = shadowed(&[&sm_90_form, &ptx_form], vec![twin]);
    let plan = plan_kernel(&registry, "k", &caps.forms(), device).unwrap();
    assert_eq!(plan.target(), Target::Ptx64, "the native objects' own calls are bound");
    let data: Vec<&[u8]> = plan.images.iter().map(|&id| &registry.image(id).data[..]).collect();
    assert_eq!(data, [&b"k ptx"[..], b"fg ptx", b"f ptx"], "the plain images, not the twin");
    assert_eq!(plan.overridden().len(), 1);
}

#[test]
fn native_objects_alone_cannot_take_another_definition_and_say_why() {
    let caps = h200();
    let device = ForDevice { name: "gpu", caps: &caps };
    let registry = shadowed(&[&sm_90_form], vec![]);
    let e = plan_kernel(&registry, "k", &caps.forms(), device).unwrap_err();
    assert!(matches!(e, Error::KernelNotSupported { .. }), "{e}");
    assert!(e.to_string().contains("libfg.so image 0 defines f too"), "{e}");
    assert!(e.to_string().contains("build with the device's linkable target too"), "{e}");
}

#[test]
fn a_library_opened_rtld_local_gets_the_global_scopes_definition_first_as_from_the_loader() {
    // liblocal.so (opened RTLD_LOCAL, before libglobal.so was opened RTLD_GLOBAL) defines `f`
    // and `g`, `g` calling `f`; its kernel calls `g`. The loader binds liblocal.so's own
    // reference to `f` in the global scope first: libglobal.so's `f`, though it came later.
    use std::collections::HashMap;
    use std::sync::Arc;

    use crate::registry::{Binary, BinaryId};
    let binary = |name: &str, images: Vec<Image>| {
        Arc::new(Binary::of_images(BinaryId::fresh(), name.into(), images.into()))
    };
    let app = binary("app", vec![spirv(&["main"], vec![])]);
    let local = binary(
        "liblocal.so",
        vec![spirv(&["k"], vec![imports(&["g"])]), spirv(&[], vec![exports(&["f", "g"])])],
    );
    let global = binary("libglobal.so", vec![spirv(&[], vec![exports(&["f"])])]);
    let group: Box<[BinaryId]> = vec![local.id].into();
    let registry = Registry::assemble(
        vec![(app, None), (local.clone(), Some(group)), (global.clone(), None)],
        HashMap::new(),
    );
    let caps = caps(&[]);
    let device = ForDevice { name: "dev", caps: &caps };
    let plan = plan_kernel(&registry, "k", &[Target::Spir64], device).unwrap();
    assert_eq!(
        names(&registry, &plan),
        ["liblocal.so image 0", "liblocal.so image 1", "libglobal.so image 0"]
    );
    assert_eq!(plan.overridden_in(ImageId { binary: local.id, image: 1 }), ["f"]);
}
