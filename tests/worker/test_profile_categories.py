"""The name rules of per-op profiles (runner/worker/profiling/categories.py), on real names: GPU
kernels as NVIDIA's libraries, Triton and XLA name them in torch and JAX traces on A100/H100
GPUs, and the host ops of torch, XLA, TensorFlow and NumPy as this project's CPU traces show
them."""

from __future__ import annotations

import pytest

from runner.worker.profiling.categories import CATEGORIES, category, short_name

REAL_NAMES = [
    # cuBLAS / cuBLASLt / CUTLASS matrix products
    ("ampere_sgemm_128x64_tn", "gemm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_"
     "segment_k_off_kernel__5x_cublas", "gemm"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>"
     "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8::Params)", "gemm"),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x2x1_ffma_aligna4_"
     "alignc4_execute_kernel__51_cublas", "gemm"),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, false, true, "
     "false>(cublasLt::cublasSplitKParams<float>, float const*, float const*, float*, float "
     "const*, float const*, float const*, float const*, float*, void*, long, float*, int*)",
     "gemm"),
    # cuBLAS's Hopper kernels, as torch 2.11 and JAX 0.11 named them on an H200 (2026-11-28)
    ("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT", "gemm"),
    ("nvjet_sm90_tst_64x8_64x16_2x4_h_bz_TNT", "gemm"), ("gemm_fusion_dot_148", "gemm"),
    ("aten::mm", "gemm"), ("aten::addmm", "gemm"), ("aten::linear", "gemm"),
    ("aten::bmm", "gemm"), ("dot.3", "gemm"), ("matmul:_MklMatMul", "gemm"),
    ("MatMul", "gemm"), ("BatchMatMulV2", "gemm"),
    # XLA CPU's library thunks, named by what their HLO holds (profiling/hlo.py); a bare one is
    # a fusion like any other (issue 59 item 5: a CNN's convolutions read as gemm)
    ("ynn_fusion.2 (dot)", "gemm"), ("ynn_fusion.5 (convolution)", "conv"),
    ("ynn_fusion (reduce)", "reduction"), ("ynn_fusion.7 (reduce-window)", "reduction"),
    ("ynn_fusion", "elementwise"),
    # cuDNN and XLA convolutions
    ("sm80_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x64x32_stage3_"
     "warpsize2x2x1_g1_tensor16x8x8_execute_kernel__5x_cudnn", "conv"),
    ("void cudnn::cnn::wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512>(int, int, int, "
     "float const*, int, float*, float const*, kernel_grad_params, unsigned long long, int, "
     "float, int, int, int, int)", "conv"),
    ("void flip_filter<float, float>(float*, float const*, int, int, int, int)", "conv"),
    ("void cudnn::engines_precompiled::nhwcToNchwKernel<float, float, float, true, false, "
     "(cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nchw2nhwc_params_t<float>, float "
     "const*, float*)", "conv"),
    ("implicit_convolve_sgemm", "conv"), ("aten::convolution", "conv"),
    ("aten::mkldnn_convolution", "conv"), ("convolution.12", "conv"),
    ("conv1/Conv2D:_MklConv2D", "conv"), ("Conv2DBackpropFilter", "conv"),
    # attention
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, "
     "false, cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, "
     "false, true, false, false, true, true, false, false>(FLASH_FWD_params)", "attention"),
    ("fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, "
     "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)", "attention"),
    ("aten::scaled_dot_product_attention", "attention"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention"),
    # norms
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, "
     "float, float const*, float const*, float const*, float*, float*, float*)", "norm"),
    ("aten::layer_norm", "norm"), ("aten::native_layer_norm", "norm"), ("FusedBatchNormV3", "norm"),
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "reduction"),
    # elementwise
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3>)", "elementwise"),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::"
     "TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::"
     "{lambda(float)#1}, at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned int>, "
     "TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, "
     "at::native::memory::StoreWithCast<1> >(int, ...)", "elementwise"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
     "namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunc"
     "tor<float, 2, 2, 0>, std::plus<float>, float>(…)", "elementwise"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous "
     "namespace)::OpaqueType<2u>, unsigned int, 4, 64, 64>(…)", "elementwise"),
    ("wrapped_compare", "elementwise"), ("input_concatenate_fusion_14", "elementwise"),
    ("triton_poi_fused_add_mul_tanh_0", "elementwise"), ("fusion.123", "elementwise"),
    ("loop_add_fusion", "elementwise"), ("dynamic-update-slice_convert_fusion", "elementwise"), ("broadcast_add_fusion", "elementwise"),
    ("aten::tanh", "elementwise"), ("aten::threshold_backward", "elementwise"),
    ("aten::max_pool2d_with_indices", "reduction"), ("_MklNativeMaxPool", "reduction"), ("aten::add", "elementwise"), ("aten::relu", "elementwise"),
    ("Tanh:Tanh", "elementwise"), ("add:AddV2", "elementwise"), ("BiasAdd", "elementwise"),
    # reductions
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
     "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >"
     "(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned "
     "int, float, 4>)", "reduction"),
    ("input_reduce_fusion", "reduction"), ("reduce.7", "reduction"), ("aten::sum", "reduction"),
    ("aten::_log_softmax", "reduction"), ("Sum", "reduction"),
    # copies and collectives
    ("Memcpy HtoD (Pageable -> Device)", "memcpy"), ("Memset (Device)", "memcpy"),
    ("Memcpy DtoD (Device -> Device)", "memcpy"), ("aten::copy_", "memcpy"),
    ("wrapped_transpose_3", "memcpy"), ("memcpy32_post", "memcpy"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "collective"),
    ("all-reduce.1", "collective"), ("nccl:all_reduce", "collective"),
    # the rest
    ("aten::empty_strided", "other"), ("PjitFunction(<lambda>)", "other"), ("while", "other"),
]


@pytest.mark.parametrize("name, expected", REAL_NAMES)
def test_a_real_name_falls_in_its_category(name, expected):
    assert category(name) == expected


def test_every_category_has_a_real_name():
    assert {expected for _, expected in REAL_NAMES} == set(CATEGORIES)


@pytest.mark.parametrize("name, short", [
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>"
     "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8::Params)",
     "cutlass::Kernel2"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3>)", "at::native::vectorized_elementwise_kernel"),
    ("fusion.123", "fusion"), ("dot.3.1", "dot"), ("triton_poi_fused_add_mul_tanh_0",
                                                   "triton_poi_fused_add_mul_tanh"),
    ("matmul:_MklMatMul", "_MklMatMul"), ("aten::addmm", "aten::addmm"),
    ("ProfilerStep#3", "ProfilerStep"),
])
def test_a_short_name_drops_templates_arguments_and_suffixes(name, short):
    assert short_name(name) == short
