"""(shipped, patched) SHA-256 of each file the patch edits, and (None, copied) of each runtime
module it copies into fairseq (None: the file is absent before the patch).

After changing an edit or a runtime module, regenerate with
``python -m fairseq_define_patch --print-hashes`` and review the diff."""

from typing import Dict, Optional, Tuple

SHA256: Dict[str, Tuple[Optional[str], str]] = {
    "fairseq/_define_runtime/__init__.py": (
        None,
        "35683f787be3cab49115775525318a6644f71c92e2d7a15d987a5f2eb98ea5cc",
    ),
    "fairseq/_define_runtime/torch_warnings.py": (
        None,
        "b38a66c4939b94a9dedcc95b3f354eb1e342d618aacfb9cb05c2cf653d52f63d",
    ),
    "fairseq/_define_runtime/encoder_fastpath.py": (
        None,
        "fbd7de4dfc4726b02ec7584a7be61d00a605b3a8aa180ccf4e55491c85e66ad4",
    ),
    "fairseq/_define_runtime/bf16_devices.py": (
        None,
        "3965ce6e8ae4e5525f98050a4b6f8db4bc3055e149ea878a8df6be640df351e3",
    ),
    "fairseq/_define_runtime/user_error.py": (
        None,
        "22a005cba3c803e3126c99ae024c5d36ce16ed3c9450dbbefa522e8eb3621fd2",
    ),
    "fairseq/_define_runtime/plugin_names.py": (
        None,
        "b5826a7e21fcdb3e5a98542d8645ceba46a4985bbcad2f0e9fd0ab9b97f90163",
    ),
    "fairseq/_define_runtime/checkpoint_allow_list.py": (
        None,
        "d1f0347715db325fcb7fcd6d3a05f19ec4c92c7e84ff64bcd6fa49685128c278",
    ),
    "fairseq/_define_runtime/checkpoint_inspection.py": (
        None,
        "eb078363edbc7ff8cf8241788e72ecbc24b01acb316f39e9c6f279eab7b1b5e6",
    ),
    "fairseq/_define_runtime/checkpoint_loading.py": (
        None,
        "b4e0f4d315ec356b2f769a5d31f71990ef760b925b5a7781129b7d1bec3c3614",
    ),
    "fairseq/_define_runtime/checkpoint_misfit.py": (
        None,
        "9fa653613a89b3b3169167864c777f44d47a3af21b8a4d01bcabe23ecbe416cf",
    ),
    "fairseq/_define_runtime/checkpoint_fit.py": (
        None,
        "e062957bb046b85cae1e3a7567bd01a68411de3df4d6697da42c8b6b5191a4eb",
    ),
    "fairseq/_define_runtime/checkpoint_weights.py": (
        None,
        "bda76f7dfec25e252830082cb8669a0cf12d4a463a253751e11afae3411f433d",
    ),
    "fairseq/_define_runtime/checkpoint_writes.py": (
        None,
        "f2465dcf9df01b6f7148220e30cefbb8d674886c125d704f67da33416d19f3c0",
    ),
    "fairseq/_define_runtime/config_literals.py": (
        None,
        "825d6a741ca6c68fcba3ed4cd74c16ed08c8aca3fae89a2b53c1d5598f0dafe4",
    ),
    "fairseq/_define_runtime/model_overrides.py": (
        None,
        "5e46770f855d1806cb56e2831115b67537d7cf0711ddadace4127f964fc60365",
    ),
    "fairseq/_define_runtime/precision_devices.py": (
        None,
        "a0397ca95e46fec8f612bd2249f981f1deda9669975ec57a60eb98aa349c7046",
    ),
    "fairseq/_define_runtime/training_settings.py": (
        None,
        "45e0ac288e8ff5aa6ffa479b1d943a53b5516a7aabe4851f81693a26325ef27d",
    ),
    "fairseq/_define_runtime/training_divergence.py": (
        None,
        "f9496e28e6e63cc6def1eb1d99e94415ff1a1835175641482c6a20ac2ab5a6e5",
    ),
    "fairseq/_define_runtime/preprocess_inputs.py": (
        None,
        "8f2f7177690892a1b3e1c028609524bdc8451457b481bb386090c028807b4ca5",
    ),
    "fairseq/_define_runtime/resumed_optimizer.py": (
        None,
        "4bc87e470b8d1488604e736ea8faa05660f145e9ebb2661dc474cb7283170c60",
    ),
    "fairseq/_define_runtime/dataset_files.py": (
        None,
        "eacb4d2cbe1e08b0d699466e670744b73b9183105a27cfcf1455766b38407175",
    ),
    "fairseq/_define_runtime/generation_inputs.py": (
        None,
        "2754ece257b6e744fbac9a95d25d23a6469ca8ba3d6d963fc7e58e82ca63a223",
    ),
    "fairseq/_define_runtime/generation_processes.py": (
        None,
        "65ec899dea0acf9d9b97017169149080555c28994ed7f78f754dc2dbaffb9fd5",
    ),
    "fairseq/_define_runtime/hub_archives.py": (
        None,
        "0e1e2c1b5d93558e9bd38f5e0df78dfb79707cbffefe16777b7555c1efa14853",
    ),
    "fairseq/_define_runtime/inference_precision.py": (
        None,
        "6456f852752008ca1f3169b5361b383eb68935b60b6235a6efe4789b7ca0af4f",
    ),
    "fairseq/_define_runtime/layer_pruning.py": (
        None,
        "56e4b2c57723bc9a929a72669c40e94cbe11942ff118ababe51e1b16b9822cd7",
    ),
    "fairseq/_define_runtime/size_bounds.py": (
        None,
        "9090434ad24836dbc170a4fe2f63449884afb8891228fde2ef44ab875d854cfe",
    ),
    "fairseq/_define_runtime/model_budget.py": (
        None,
        "6d6bf014ec5eb93288eebdd475912f5834349dfea520d7381d08fab926b5601f",
    ),
    "fairseq/_define_runtime/model_shapes.py": (
        None,
        "8ac7a8cd88e7c0b4aa66b6afc2310ba62b96c99a96f5fd437f4858863bdd47fb",
    ),
    "fairseq/_define_runtime/batch_sizes.py": (
        None,
        "fd5c4b2bcbf980ae1181bb52297d9bf118ab66ea3ee9bc9fb12e75a321ba47b6",
    ),
    "fairseq/_define_runtime/dictionary_files.py": (
        None,
        "6b59527e30cabe3a5c29fe66e86f904c76ed8d2f11b98571d82863f155353036",
    ),
    "fairseq/_define_runtime/output_links.py": (
        None,
        "f92b97e6dd594435898ab234433b571fdc059ce7282136b8d225579b9f0e1e07",
    ),
    "fairseq/_define_runtime/eval_lm_settings.py": (
        None,
        "3b5efcbe4f381eba22bd7283a6c564567f524211119ca4f2fb5cda95fff383a3",
    ),
    "fairseq/_define_runtime/adaptive_bands.py": (
        None,
        "02e133d25e6c5dace95a827ff2462b8922f7af8e5ebcd8406d639747cd160b52",
    ),
    "fairseq/dataclass/configs.py": (
        "3bad79013565db4477ed859ce9778397588c9efaeb7eaaecee1911cc7409dde2",
        "9215fade9365eb5b86d669bd2dce0be950a00fd5d2870c6da1e7f38ab253e788",
    ),
    "fairseq/models/transformer/transformer_config.py": (
        "2a8c6eab00c3ac2d03896970ef13c68bf5b0ce454d756dfa04f7211b22fcb0be",
        "c61dba2f0d04c1b76a37e5d326d8e85fc090667808fed9adc5c0c20d94b385a7",
    ),
    "fairseq/dataclass/initialize.py": (
        "35bb8e50614902ad385e467fba4e251c7c5203fbd34398c1974a416c4ddc72d8",
        "d7ed8b4c8c0676b873f410791ce510689505a0acbac19121ca9202e24fc7805e",
    ),
    "fairseq/examples/data2vec/models/data2vec_text.py": (
        "8c8faac6067e09756dbd6786b6742e22fb2615d4d7da8ee672f1496e3ff80980",
        "27688c5d92d97ecb26f2f1c20e3bed1d7ebe13e5977cb14e2f5e171411a4e462",
    ),
    "fairseq/examples/speech_recognition/new/infer.py": (
        "1880e1911e2f7c4c55b5c8328da854e416f8ba6f582e56d22e217acdf903ef41",
        "4646ef0726ce9e9343b4ea0ac570c673ba4be720b307fc6a3105727619f29b9d",
    ),
    "fairseq/examples/wav2vec/unsupervised/w2vu_generate.py": (
        "ac2d32fb2a325186b2f9f69612bbe525a94f8c3a0a17777e2e8704efc0a49863",
        "71d0c6db730c992e21cdabf96092eced91e9f588c0664a44514d835debc1d4e8",
    ),
    "fairseq/examples/wav2vec/unsupervised/tasks/unpaired_audio_text.py": (
        "457f636ad85d3b5c0979f6b8d7bddfbb4bf0b6ae502a09cbc781f746cba5524f",
        "d67377635ba0bfc1d65727d25aeecf0345b366587e8f5d58db1ae190cead4b0d",
    ),
    "fairseq/examples/wav2vec/unsupervised/models/wav2vec_u.py": (
        "abb7a4d0c0927c7cc002fcfbc448bd435dc6e2d4d6ad43b1b90335e60ceecfcf",
        "4528e4d25224e4c577903ed4ce8a108af900d915612378212a3d8abdb00945f6",
    ),
    "fairseq/models/wav2vec/wav2vec2_asr.py": (
        "ea79bb94fa50526d533339d0e0ef4c9e22759886737bc881d5525a6e3e7a5d32",
        "46b445e3cd491d1aa6934519920a40fa09ebd536d84604fefa1c4d358dea5532",
    ),
    "fairseq/dataclass/utils.py": (
        "35ea1dce14e76e3412a04556a46bc5a2e93d0ff63cc96270bdaae62bf6b9feb8",
        "60d5b433005a9662349b1873696368fe61630daf8ca06e9be0f8cbcd162268d1",
    ),
    "fairseq_cli/hydra_train.py": (
        "c95301261e65ce697102e84488b21421c75ab4650a18215b3507949470981213",
        "de75e872fef5b2c4d3556104d6f09b98f35459faee94874bfe14f5c3dcb06331",
    ),
    "fairseq/config/config.yaml": (
        "227b78972526a850e12016e750742d43adb31adf51f8cf6811dd12825280f8c6",
        "48e2723d36f4b2517dd392ca9a7783a7ae18b6c14741eb987acddd93ec8ee867",
    ),
    "fairseq/checkpoint_utils.py": (
        "fdfbefe5ef9016b1b40e196110e1a87d743cf3a73952711729b6677ea9b58a71",
        "0dd2b537553723668ab21a374be0f21777ab43d0ab4e49ec278577b6e42907c6",
    ),
    "fairseq/config/model/transformer_lm/transformer_lm_baevski_gbw.yaml": (
        "190b4ea56918a6df02e6c95a6003a108d106b92292d60187b528cffe4a511788",
        "330c5d14b77b2f240e8381c3814be92cd52f71561b75ca1fb69ba09f9d8f612a",
    ),
    "fairseq/config/model/transformer_lm/transformer_lm_baevski_wiki103.yaml": (
        "e00ac4e30da64e4d475d6feb73ea7d62ea37fb172292da60699187097845681a",
        "118b7d365024bc6e6b049e45d3d4e499b946b8027af42ca7005aef082e5766dc",
    ),
    "fairseq/config/model/transformer_lm/transformer_lm_big.yaml": (
        "44ae206f69dabb3f0b8fd01eb60bfff6664fa4af1b2d6c48b3b3b860326d524e",
        "b9aeea15764d85ee6a2be533a4c4690d48fb8609bf465cb28ff7d6868fb4cdc6",
    ),
    "fairseq/config/model/transformer_lm/transformer_lm_gbw.yaml": (
        "190b4ea56918a6df02e6c95a6003a108d106b92292d60187b528cffe4a511788",
        "330c5d14b77b2f240e8381c3814be92cd52f71561b75ca1fb69ba09f9d8f612a",
    ),
    "fairseq/config/model/transformer_lm/transformer_lm_gpt.yaml": (
        "19b37a87ae8b51526559ca4e37a04d9c884427e39e82a68d343edd6c95635ad8",
        "1c096a5afae7222ffe6983286e515f4f50a22c30cbd8902fe8b936ce584331e2",
    ),
    "fairseq/config/model/transformer_lm/transformer_lm_gpt2_big.yaml": (
        "ad0e94f6a36c8ff8cf0e7bde13af4c8aa8d3efbbb1bc61c90af69f30e30beeb8",
        "580eb9526c1ee4fc01f4da0b1d366fe8304daff64e760ef1aa9fd8df7f371fc5",
    ),
    "fairseq/config/model/transformer_lm/transformer_lm_gpt2_medium.yaml": (
        "a1ee42a4281d103cf4cc0be5303a38b374a3df5124d9bf1c7fff587da7623997",
        "917faa625a9037dbfced4e24b11a6314103535e7c57c13544d202bdad135f3be",
    ),
    "fairseq/config/model/transformer_lm/transformer_lm_gpt2_small.yaml": (
        "d69e38dc28610f5ad4a418660909752533b3a471589eb3751188c4327e895e86",
        "de7a741f4c5eef255e229a2485034e128dbd10945951a4571a20ea548b11cf59",
    ),
    "fairseq/config/model/transformer_lm/transformer_lm_wiki103.yaml": (
        "e00ac4e30da64e4d475d6feb73ea7d62ea37fb172292da60699187097845681a",
        "118b7d365024bc6e6b049e45d3d4e499b946b8027af42ca7005aef082e5766dc",
    ),
    "fairseq/config/model/wav2vec/vq_wav2vec_gumbel.yaml": (
        "c8c559d5ead863a8035d575fa2015cc74d37361d29b6c3b4f30ed10ddcbb2499",
        "2c6b5cf299eea4abbb50465e6cd4bf1a5e79003f2ced19e01399dfdea6689714",
    ),
    "fairseq/config/model/wav2vec2/wav2vec2_base.yaml": (
        "e0dce91e66419f94b4495645c9d8745ef5791327eedcbb40398eeb567aca1ab7",
        "8c13b92540c66a482671dea9a4d313ae039e8eab202c8c9641b173006586dbfb",
    ),
    "fairseq/config/model/wav2vec2/wav2vec2_large.yaml": (
        "3247a2825dac7467b8a8d0ac55c545197e7ff524bbb2f06fcaeff9472733d692",
        "6a1ce9a735e9c3ec4f603ccfa317f5058bd18c21bf2c03589dbc593e626c5693",
    ),
    "fairseq/modules/transformer_layer.py": (
        "593fb4d67ce8843932b4a6ad667403e4904ac77065144186bfb3526c91db0a4d",
        "a48c0d97cd5ac3710ef0f8447e09ae4b0d2fbfa7a638e44cc18ad4666ab9dade",
    ),
    "fairseq/modules/multihead_attention.py": (
        "80151fab89e2f78940aca9663d51f38f1f26c15037b12734a4839d8a99e7d8a1",
        "c6af2b1c0bc116a5a0516f2330a419b273bbb64d05435281de0ce70d96fcd1e4",
    ),
    "fairseq/data/iterators.py": (
        "9e42dc6d16ec25aece1ec45bece718f4f54a617b338d1ec2a7f80443999bbf40",
        "15a8376e38414914de2b03596c8e36148a85ad821cc6496ee3771455e5a3b00d",
    ),
    "fairseq/tasks/fairseq_task.py": (
        "7315e5463587cb203ac7e3eb76bd23f42bd08cbf45cde682a811c469af020e9c",
        "2ef6f07132086718aa721b685a2bca0ed8568d57e43e90ecaf06f2e8678de042",
    ),
    "fairseq/optim/amp_optimizer.py": (
        "7ef6436dd807b5a536840ba386938093ced5b3c021717432bf5e8ee8966e2154",
        "2a6ac05a6385b79b3e40099ac1f18a814bc1e2dedd5a7227e036b970705bfa62",
    ),
    "fairseq/models/transformer/transformer_encoder.py": (
        "364db9a3cc6925a83bb7e17d8f661c43102a705c18931208c4750b3930b7e333",
        "794134a03e2da5a3a6c66ebf4ec14239f762ac75019aa37e4951e9652f8bbccb",
    ),
    "fairseq/data/token_block_dataset.py": (
        "023518dd01e906623ed8d78677ef3b33693d86c5aa22d453a19c096a48cb6a53",
        "a96923cf97527de067f38b1750b4b536c0a5883c974e6caee9ff6c77edd3693b",
    ),
    "fairseq/data/language_pair_dataset.py": (
        "f3c660f952d5d924fb3c8ce4bcf02857f9b0cab1658ea35fe6bd510e12a710b2",
        "0452d3f4d6d3aed5b33bdb94f049c2a7d2b9db0540dd77173dca1c4430a04ff9",
    ),
    "fairseq/data/data_utils.py": (
        "3cff49d5372bba36cd3c7b5ab88bdd99b0172f4790e417022b572aa8695f92b8",
        "7f0bde0d54d8b75286a4feddc506b273855ba869925055a5bd266f4a3b5838c5",
    ),
    "fairseq/modules/dynamic_crf_layer.py": (
        "024870d3b488187925e92e664c19052490cbc67171b6bd7ba871483aeee71536",
        "683aecffafc4d6ba11242819be34cbd234e2ef25459c86b8f89fbf9a99bd1c18",
    ),
    "fairseq_cli/score.py": (
        "6db73958873e1d6d1d5a4b60cd6e04412e2cc151521e685046b16f212bbea741",
        "1c59b488a39ab1018b8b66aeae2fecf69561ae99f725391b49a5c6c9ecbfb1d1",
    ),
    "fairseq/data/huffman/huffman_coder.py": (
        "e2ef64b75aece5f448b34f8bfd80bcfb83d2c1793a2ff5dcc6256bfaa427d61a",
        "003b50f94a81f89ff177f06a72c183a784b21eeab2c6699bfdfafca1cde9918d",
    ),
    "fairseq/trainer.py": (
        "50424d39b8022d15b3454a5b0c7c0e6238ca5ce601ed9acfff029f6746038410",
        "3e60416e450858a3782b0060c82da20f5514dc827d4b8ed0713f4659e91c588e",
    ),
    "fairseq/models/distributed_fairseq_model.py": (
        "f2afe1a8de94b95e3451249555e2a40e164d36cafa6bb40b2e1d37c12555ec6e",
        "e79df53c21490e684524ca9ee2a017224d2370e4b1f1c0f3d97386e310d50b5a",
    ),
    "fairseq/options.py": (
        "9dab74785d9ec996b670bcaeda8b647766b5db8e3757a17b76bb757a9159df39",
        "7b4123c83e0567b8a6dba49ececea23dbd077ef9621ac4a55e16ab50e7748002",
    ),
    "fairseq/tasks/text_to_speech.py": (
        "5ddb3b1164f537ed96ef54d92b3b7a1c872968e86089f945f4bbaee3dbf4cf54",
        "f4ccf7fa7b0f2eebfd2f520b2d939f85bb0d4f833e2a1d17fea671136abc9d20",
    ),
    "fairseq/__init__.py": (
        "f542e0f2565e6701a3881a3d24ba277b5c07ba5b2451691c84ad5e8c4da01e04",
        "b2a6fae3904ed717ca97c651f9a55a4d7553481b1400b69074fbc382131bc92f",
    ),
    "fairseq/models/__init__.py": (
        "73c49eedbd9ed4f0938bd5b86ecbca395eda56001d6a8b35a895cde5e8f073cf",
        "118d56a527adb4925e8dc6bc83288d7463c0cf6ab1e1922d23e9769bf08dbc96",
    ),
    "fairseq/tasks/__init__.py": (
        "91f1c169e6d2468fce34f032a12b341fa4f300ecc59030a50c03403177399348",
        "71cbf457579dc4c6aa60d7964ffe000d4848a76dedf42b926258fb800588253f",
    ),
    "fairseq/utils.py": (
        "43f3ad422fe10996e66c0bb80d8269b9cab0c810f10256143fd8d4979fff663b",
        "edd043e094951a387b48220ae41d6dd293d7be31a587dda064ecc606c8096cb9",
    ),
    "fairseq/distributed/utils.py": (
        "f01e07f7f12c5e81c9b6ea1735e6b1dc45e43ed6e30fac5dc3844af3cd0d6205",
        "82b0961f6f13072c23ff5559d94118e12920735e867253631f0af3a2f5c2d8d4",
    ),
    "fairseq/models/fairseq_model.py": (
        "881e8b63349a8bf26e491e1724b1934bae274e8bbe5ae95de203b8de76a74bdd",
        "51c53c965dcaba6c1ad88b5a16ef9701933921e919b87f65720dfce1f683bbf1",
    ),
    "fairseq/optim/adam.py": (
        "42496814f276444dfcb534d7ebdf2b0c6098543a70bdfcee898b28cfc4678c90",
        "f32cdc91a4f71e446c59ea7984fd1f2f7bc245fddc84f7b31f2f45917d11537e",
    ),
    "fairseq/optim/cpu_adam.py": (
        "e531d0c18bd09f83cb57f0ea588bc1b4dc076186b082ac6ace4d9478bc0788aa",
        "2e7f4938526153e9788af4b786c9dc69c662bb1ada992b9eba11db1c6389fc03",
    ),
    "fairseq/optim/adamax.py": (
        "80ba89321adc25182a84fc1b3a400636ac20615fca3042b48056a52637f568f5",
        "4d7587e6d718becdfca593d9836fea23443f222bb6c42085b969f7d750e1d692",
    ),
    "fairseq/optim/adafactor.py": (
        "d9afe0094f757782082dc69ce8c93c1e053beb0266101d4de0e61837d8e69b55",
        "59348a8e19f2ed11357051cc90dc6c7b1dffd9b98897ba16720e423fa5084e78",
    ),
    "fairseq/optim/fused_lamb.py": (
        "abd3267516b3fba406218fe578d1f39f9e528e4ca4a1c78ab78313f4025a313e",
        "5183e841f11d13c281873fd3c1de4c6ad17b31f243716870b9224f375b1f4d81",
    ),
    "fairseq/criterions/ctc.py": (
        "8fce1814132d5fb02e416ed56e60a8f44fcc2f0e869b51eb6a2f4bdf7615c050",
        "4a0162d1c90b1a3a76ab41f5e68cd751c3194a617f870eb01cd2c7b5be8df966",
    ),
    "fairseq/models/lightconv_lm.py": (
        "abd4dccda69a568790cf9fe6609e91fde573cff8f9edd4f8a08743f4d69bf04f",
        "ffca653c6ac6f452b19b746f477fb4d4b02d1f8ce6ef8c12b793c0aee54df493",
    ),
    "fairseq/models/hubert/hubert.py": (
        "69e2cec392646e2f8af3647ea7d322ab7b264b695ed32ad23a3d15c57f4927c2",
        "dc34efbfd44cd226409df72831c15c83aa1040d9033fe664f040852673b48cf3",
    ),
    "fairseq/models/transformer_lm.py": (
        "21f2a6296174004c1f5898dd331fa9ecfd522f4f21fa0a45171b2a9a3b258b22",
        "68e8da037d11f87e7f900babdd0ca4c546964842508e1218fd105ee0b0f2c69e",
    ),
    "fairseq/models/fconv_lm.py": (
        "9074aac0e2b908a001d1526b9eb2de168afb1eada5778578169f3e65cb948777",
        "608292b7b8d8797593f82b1b15a07b273c4100111518250a86627a7dd6e6b25d",
    ),
    "fairseq/models/fconv.py": (
        "432597def375aad222b2ba9dcdb5b51b0a46b992e90f8a8e1641b091c8d3eb80",
        "b4cdeb1601d82b88ed65ed0b9481a73e4d84f04d5e9cac8369396fc025a1afff",
    ),
    "fairseq/models/fconv_self_att.py": (
        "83463739f7ba798d73098c7b17a2c6ea13b6fdf8f3083ba577cbca21864d7a36",
        "fe28139d61b28833592088c0179b9dedb55194f6a9182ce0fc0491d75a1afbff",
    ),
    "fairseq/models/wav2vec/wav2vec2.py": (
        "a97951fc1c48fd02f8ed2eb32b7215bfcce14b8f82a31e59382c06f12505b959",
        "da7117c81429fc24cb3dd0f08eca55b55e2b4811fbf62cef33a9d40c9fcfd290",
    ),
    "fairseq/models/wav2vec/wav2vec.py": (
        "d8f8b654ced06cfe871469b27cc722e71a0be4a2b727f6f466ecf9ff823406f4",
        "88d1d81680bdce86bf963fd32f3ec4ec6767fe0b98f2dc5bec25977b9e08ffdf",
    ),
    "fairseq/models/speech_to_text/s2t_wav_transformer.py": (
        "7f9efa809c420611b8caff9d5ca246126e5590f0c974c3e20b601a9662b3a6e7",
        "92224455760e5a8bf635c2be18f62623f97d6262b6adaa7b75c32d0ec38f9dc6",
    ),
    "fairseq/data/audio/raw_audio_dataset.py": (
        "f6ba8f5c51f3afe559d4537269d01b01c3eb621bc42aec37d8a969e017cb669b",
        "4ed666af01d6ab9de27c67f2fd2f2cfc0253b3652493bc825f3599387cd09f97",
    ),
    "fairseq/data/codedataset.py": (
        "c79ca7db7a9eb8326d6bee08373b9e0a85ee3ee9ab1bd0320bd6b392ed2df74e",
        "bd4fa30bba1cfbd15b2c461e08e8d25589f76106870a4f3174886a22982157ec",
    ),
    "fairseq_cli/validate.py": (
        "107e323ac622180fc04607049d6c98e4995e67dc85047bb8bb9324a8ce7f1fc8",
        "603eb0092ad3a6e312bf41efeb7c1169823aa446cb109725a62e9152690236d2",
    ),
    "fairseq_cli/eval_lm.py": (
        "e7bbe5275c40905ec5b9a442f76bf991795eddebc2fdb205961d5e906ce55377",
        "0b85561a1f900f917e0fc8c3a015c19159efa4a132bb6cf2a6decc8e04344dfd",
    ),
    "fairseq/examples/data2vec/models/data2vec_audio.py": (
        "ea2fff64a7d77888e2c1ebe229f9d040dc229935dfa68dafa979f9f8963bb17d",
        "bb797ffc55934083797ec8449790cacc56f408bea3cd21bad749f04a1fa34801",
    ),
    "fairseq/examples/speech_recognition/models/w2l_conv_glu_enc.py": (
        "7a44090a3a9512f4a319d4ecf9348c3a104c634a48d4be95f2c292f20418caae",
        "a42b702096cdd59c9590dc3217c5bb182adadd36336b06f164d19f498e6d008d",
    ),
    "fairseq/examples/speech_recognition/models/vggtransformer.py": (
        "2c748f4892f427eb073f09555f57f56dd10da0356c4a0f42663e5ef51b859b94",
        "f72816fe7b850a06d2f7a4a625c9088b1b21389aa597e6d3be428580e09bf8e8",
    ),
    "fairseq/examples/criss/save_encoder.py": (
        "3131ca22bff94824c1da448d9d6b53a7d4fee774758c50bb52ce0f6f499c3fa6",
        "14af6e695b50663c4794b1d7022a2e25a65b5db6173e8bc53aec571fd37bae06",
    ),
    "fairseq/examples/discriminative_reranking_nmt/drnmt_rerank.py": (
        "722289d068c1d21d391d7fab604c2d5828f85403e8eaf8ad61a18fc0006c192c",
        "abdb52428a8ba8997e2f5ee6a387fb911a2396de47f791b3e17532578d68ae4d",
    ),
    "fairseq/examples/textless_nlp/pgslm/data_utils.py": (
        "e6f6b95380be8e96b45d026eb6f4a24f380b8da7d35d91607e583cdfca044ec9",
        "cead50a1fe7e2174ea400dba0671aea6b55568f07c35a8ec97d3fb2613388a40",
    ),
    "fairseq/examples/textless_nlp/pgslm/quantize_f0.py": (
        "1231c9f882fc5bd1ad8c3cb4b62efa55aa7adc3bb73094ed8bf2bb23548ced99",
        "aa4b677798c35b9053a5920a8dc39454f438af04f3d07b7a4b0ac2e532261216",
    ),
    "fairseq/examples/textless_nlp/pgslm/sample/sample.py": (
        "c5a1f8c807e521e18e48d742c5a33b0279b702ad9be36738f99608bb1ae53a92",
        "1632cdb32e61d00bb2188de9af2b61e0b4619e7f8f98e014c573f637a1dd4fd1",
    ),
    "fairseq_cli/generate.py": (
        "946db64eb1305557a49e2f3ac11ab28fd9ff857bfb16909675dce238ef81c2e7",
        "a18d0f45efbc91b00236a03ca92eac0213aed8cdea176cf3bebb28eb391ce221",
    ),
    "fairseq_cli/interactive.py": (
        "3dc2efaa654c256fd5c0110c991869b131e4ec44edeb9bff4eb6dd4dbf1b0060",
        "88f105d89161bafcf5eef8f03b276aa2be44776bb91347e48c5450b185cc34a3",
    ),
    "fairseq_cli/train.py": (
        "a86d6470a265025807fb77f3f712c45cc151b33da5688367a45163c8b835ba7a",
        "847a59cf2932449fd2e331d4b49c160a8afa58c81848e486355633067cc0390f",
    ),
    "fairseq/optim/fairseq_optimizer.py": (
        "cf1e96c754583437cf7ec62eab7f63d82fc3f174315221f5c00db7f421d1d390",
        "dbc61006237038e18bdb2af0f6e2d7ff139784aa23452f54c0be5af3debe56ed",
    ),
    "fairseq/optim/lr_scheduler/tri_stage_lr_scheduler.py": (
        "6edb4838ca94327d98b8d7a0925f8fffad2b744405be0bf4e20edb64247cd82a",
        "c921c3ce1b80848457f86ae869eb3f7afd4f8f5d8ebc99e3744b0b895c7e6ad9",
    ),
    "fairseq_cli/preprocess.py": (
        "989aa8fb0d2d426294e09cb43b33efb48607d49751cbb4e8296acad35e5b0c4a",
        "49c899c24e83dfe01a836b4fb21c74a03b66cb9cf27df79c0cbb6ed6f2eb4c35",
    ),
    "fairseq/data/indexed_dataset.py": (
        "82e2ad6a66978e00c07018efe3e56b556f0a11cefcb7d97ff72c4476ece108bc",
        "cc39a931b8b71bdaaa1441a8a7a00a614389f4984f652bcf6598285832bea489",
    ),
    "fairseq/tasks/language_modeling.py": (
        "0abd24777c8224f72b9149e7d0da81f6aa4629b6c6a0d366ac9b9f8ea229f86a",
        "7f7869ad12d5265a286acce638c55b80928cc63a9b2975f08b0a1b0b3f3eee22",
    ),
    "fairseq/tasks/translation.py": (
        "be1b575d8f33371e1e7ab3dab6ec345cb46db749273f977fe4bb75176249b43d",
        "5364d8748a3d3df3cdcf08deba42bdda333a85091c699c6bd72604ab4bc91724",
    ),
    "fairseq/sequence_generator.py": (
        "f1f6827af1e0a54f28fde70b045cb0bcc60f46d496fca057516fffa789c89cf2",
        "86d4a7c7ab7d96038a9eb4a7eaa61ac8300cc690598c4bfb81278fd139f8268a",
    ),
    "fairseq/file_utils.py": (
        "8a82153ba8d8d5d8e01855e1d8a1f772ed8145e9f347a78085ca3f4495e61dcb",
        "a9c0ed4c59f1b67e24cc409afecc8ce3df2c7096ee2ef98fa0f87a79738b2f08",
    ),
    "fairseq/models/transformer/transformer_legacy.py": (
        "15d3cfc3c21a8792a46a7ce9f18e938bee339395c0b00215db1990a163a2abc2",
        "8a1e15fa5f1d54abe643fe51f4559f65785fcc19ac7242b5604fa8e8823d689e",
    ),
    "fairseq/models/transformer/transformer_base.py": (
        "e62ea38e768adbf41aef37620aeefd7c647281e061e402e809b271ce5ed56d48",
        "28ec576e873e959c5a81f4abda0c4afa67f23d1fb4ec1248c667c950612e1c52",
    ),
    "fairseq/data/dictionary.py": (
        "3d14a5a839401f1144ceda331d26a776daf5c522fc4bf549fe69c2851c6b7c80",
        "479e5e95c292d826fc52b5cab9f435aca325a2d78475c473edc132303547ec33",
    ),
    "fairseq/modules/adaptive_input.py": (
        "854c628e2039db47d3f140e6dc88ba73789ecc8780fa49fc8e71fb102d1a8d11",
        "5892897dfca64543815c0dc90ff7784760fca0cea3a9dff46ceda7a458748894",
    ),
    "fairseq/modules/adaptive_softmax.py": (
        "3a42ebf03542278cdd0d393e0cb86a1e8ce604ad57cd14d95d0f8eed92873e54",
        "80e38515302509dc6a306c8475582633991003d942f442e10682b7a9780c0c27",
    ),
}
